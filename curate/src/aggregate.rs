//! Stage 2: one record per pull request `(repo.name, number)`. Its state (base, head, action,
//! merge flags) is the **latest** event's, by `created_at` then numeric id: an `opened` event
//! can carry an older head than the `closed` one. Title, body and author come from the latest
//! event that has a title; without one (trimmed payloads) the author is the earliest actor.
//! Folding keeps maxima and minima only, so event order and repeated events do not matter.
//! One aggregate holds one partition of the run ([`crate::spill`]): a repository's events are
//! all in the same partition.

use std::collections::{BTreeMap, HashMap};

use crate::events::{EventOrder, IssueOpened, PullRequestEvent};

/// Everything the later stages know about one pull request from the events.
#[derive(Debug, Clone)]
pub(crate) struct PullRequest {
    /// `owner/name`.
    pub repo: String,
    /// The PR number.
    pub number: u64,
    /// The latest event (its `repo.id`, action and PR object are the PR's state; its body is
    /// in [`PullRequest::described`]).
    pub latest: PullRequestEvent,
    /// Title, body and author login of the latest event with a title.
    pub described: Option<Description>,
    /// Order and actor of the earliest event.
    pub first: (EventOrder, Option<String>),
    /// The PR's `created_at` from any full payload.
    pub opened_at: Option<String>,
    /// How many distinct events were folded.
    pub events: u64,
}

/// A PR's text and author.
#[derive(Debug, Clone)]
pub(crate) struct Description {
    /// Where it came from.
    pub order: EventOrder,
    /// Title.
    pub title: String,
    /// Body (empty when null).
    pub body: String,
    /// Author login.
    pub login: Option<String>,
}

impl PullRequest {
    fn new(event: PullRequestEvent) -> PullRequest {
        let mut pr = PullRequest {
            repo: event.repo.clone(),
            number: event.number,
            first: (event.order.clone(), event.actor.clone()),
            described: None,
            opened_at: None,
            events: 0,
            latest: event.clone(),
        };
        pr.add(event);
        pr
    }

    fn add(&mut self, mut event: PullRequestEvent) {
        self.events += 1;
        if event.order < self.first.0 {
            self.first = (event.order.clone(), event.actor.clone());
        }
        // The body lives in `described` only: it is most of an event's size.
        let body = event.pull_request.body.take();
        let object = &event.pull_request;
        if self.opened_at.is_none() {
            self.opened_at = object.created_at.clone();
        }
        if let Some(title) = &object.title
            && self
                .described
                .as_ref()
                .is_none_or(|d| d.order < event.order)
        {
            self.described = Some(Description {
                order: event.order.clone(),
                title: title.clone(),
                body: body.unwrap_or_default(),
                login: object.user.as_ref().and_then(|u| u.login.clone()),
            });
        }
        if event.order > self.latest.order {
            self.latest = event;
        }
    }

    /// The author login: the described event's user, else the earliest event's actor.
    pub(crate) fn author(&self) -> Option<&str> {
        self.described
            .as_ref()
            .and_then(|d| d.login.as_deref())
            .or(self.first.1.as_deref())
    }

    /// Whether the latest payload is trimmed (no merge status in the events).
    pub(crate) fn is_trimmed(&self) -> bool {
        self.latest.pull_request.is_trimmed()
    }

    /// When the PR was opened: the payload's `created_at`, else the earliest event's time.
    pub(crate) fn created_at(&self) -> String {
        self.opened_at
            .clone()
            .unwrap_or_else(|| self.first.0.created_at.clone())
    }
}

/// All pull requests and opened issues of a partition.
#[derive(Debug, Default)]
pub(crate) struct Aggregate {
    /// By `(repo, number)`, in that order.
    pub pull_requests: BTreeMap<(String, u64), PullRequest>,
    /// Opened issues' text by `(repo, number)`: the latest opened event wins.
    pub issues: HashMap<(String, u64), IssueOpened>,
}

impl Aggregate {
    /// Folds one pull request event in.
    pub(crate) fn add_pull_request(&mut self, event: PullRequestEvent) {
        let key = (event.repo.clone(), event.number);
        match self.pull_requests.get_mut(&key) {
            Some(pr) => pr.add(event),
            None => {
                self.pull_requests.insert(key, PullRequest::new(event));
            }
        }
    }

    /// Folds one opened issue in.
    pub(crate) fn add_issue(&mut self, issue: IssueOpened) {
        let key = (issue.repo.clone(), issue.number);
        if self
            .issues
            .get(&key)
            .is_none_or(|old| old.order < issue.order)
        {
            self.issues.insert(key, issue);
        }
    }

    /// SWE-bench's problem statement for `numbers` of `repo`: `title\nbody\n` per issue with a
    /// known text, in number order.
    pub(crate) fn problem_statement(&self, repo: &str, numbers: &[u64]) -> String {
        numbers
            .iter()
            .filter_map(|n| self.issues.get(&(repo.to_owned(), *n)))
            .map(|issue| format!("{}\n{}\n", issue.title, issue.body))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Aggregate;
    use crate::events::{BranchTip, EventOrder, PullRequestEvent, PullRequestObject, User};

    fn event(at: &str, id: u64, action: &str, head: &str, title: Option<&str>) -> PullRequestEvent {
        PullRequestEvent {
            order: EventOrder {
                created_at: at.into(),
                id,
                id_text: id.to_string(),
            },
            repo: "a/b".into(),
            repo_id: Some(1),
            number: 5,
            action: Some(action.into()),
            actor: Some(format!("actor{id}")),
            pull_request: PullRequestObject {
                title: title.map(Into::into),
                user: title.map(|_| User {
                    login: Some("author".into()),
                }),
                head: Some(BranchTip {
                    branch: None,
                    sha: Some(head.into()),
                }),
                ..PullRequestObject::default()
            },
        }
    }

    #[test]
    fn latest_event_wins_in_any_order() {
        let events = [
            event("2020-01-02T00:00:00Z", 10, "closed", "new", Some("final")),
            event("2020-01-01T00:00:00Z", 99, "opened", "old", Some("draft")),
            event("2020-01-02T00:00:00Z", 9, "synchronize", "mid", None),
        ];
        for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2]] {
            let mut agg = Aggregate::default();
            for i in order {
                agg.add_pull_request(events[i].clone());
            }
            let pr = &agg.pull_requests[&("a/b".to_owned(), 5)];
            assert_eq!(pr.latest.action.as_deref(), Some("closed"));
            assert_eq!(pr.described.as_ref().unwrap().title, "final");
            assert_eq!(pr.first.1.as_deref(), Some("actor99"));
            assert_eq!(pr.author(), Some("author"));
        }
    }

    #[test]
    fn trimmed_author_is_first_actor() {
        let mut agg = Aggregate::default();
        agg.add_pull_request(event("2025-11-02T00:00:00Z", 2, "closed", "h", None));
        agg.add_pull_request(event("2025-11-01T00:00:00Z", 1, "opened", "h", None));
        let pr = &agg.pull_requests[&("a/b".to_owned(), 5)];
        assert!(pr.is_trimmed());
        assert_eq!(pr.author(), Some("actor1"));
    }
}
