//! harness's integration tests, one binary (one link of everything they use): a module per
//! area.

mod agent;
mod cli;
mod cli_reward;
mod dataset_parquet;
mod execute_docker;
mod foreign_rows;
mod grade_fixtures;
mod grade_languages;
mod harbor;
mod install_escapes;
mod relocatable;
mod run_docker;
mod run_v5_rows;
mod slurm;
mod support;
mod swebench_task_repo;
mod tamper;
mod task_repo_go;
