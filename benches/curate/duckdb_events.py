#!/usr/bin/env python3
"""DuckDB's side of the event-stage comparison (benches/curate/run.sh).

  duckdb_events.py DIR THREADS    prints `<seconds> <pull requests>`

The same work as curate's event stage on the same files: read every `*.json.gz` line, keep the
`PullRequestEvent`s, take the fields curate keeps from the payload (parsed once per event with
a list of paths), and group by repository and number with the latest event's state. The
envelope columns are given (no schema sampling) and the payload is read as JSON text, as curate
reads it.
"""

import sys
import time

import duckdb

COLUMNS = (
    "{'id': 'VARCHAR', 'type': 'VARCHAR', 'actor': 'STRUCT(login VARCHAR)', "
    "'repo': 'STRUCT(id UBIGINT, name VARCHAR)', 'payload': 'JSON', 'created_at': 'VARCHAR'}"
)
PATHS = [
    "$.number",
    "$.action",
    "$.pull_request.title",
    "$.pull_request.body",
    "$.pull_request.merged",
    "$.pull_request.merged_at",
    "$.pull_request.merge_commit_sha",
    "$.pull_request.base.sha",
    "$.pull_request.head.sha",
    "$.pull_request.user.login",
    "$.pull_request.created_at",
]


def main():
    folder, threads = sys.argv[1], int(sys.argv[2])
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    paths = ", ".join(f"'{p}'" for p in PATHS)
    query = f"""
    CREATE TABLE prs AS
    WITH events AS (
        SELECT repo.name AS repo, repo.id AS repo_id, id, created_at, actor.login AS actor,
               json_extract_string(payload, [{paths}]) AS f
        FROM read_json('{folder}/*.json.gz', format = 'newline_delimited',
                       compression = 'gzip', columns = {COLUMNS})
        WHERE type = 'PullRequestEvent'
    )
    SELECT repo, CAST(f[1] AS UBIGINT) AS number, count(*) AS events,
           arg_max(f[2], (created_at, id)) AS action,
           arg_max(f[3], (created_at, id)) AS title,
           arg_max(f[4], (created_at, id)) AS body,
           arg_max(f[5], (created_at, id)) AS merged,
           arg_max(f[6], (created_at, id)) AS merged_at,
           arg_max(f[7], (created_at, id)) AS merge_commit_sha,
           arg_max(f[8], (created_at, id)) AS base_sha,
           arg_max(f[9], (created_at, id)) AS head_sha,
           arg_max(f[10], (created_at, id)) AS author,
           min(f[11]) AS created_at,
           list(actor ORDER BY created_at, id) AS actors
    FROM events
    WHERE f[1] IS NOT NULL
    GROUP BY repo, number
    """
    started = time.perf_counter()
    con.execute(query)
    (rows,) = con.execute("SELECT count(*) FROM prs").fetchone()
    print(f"{time.perf_counter() - started:.3f} {rows}")


if __name__ == "__main__":
    main()
