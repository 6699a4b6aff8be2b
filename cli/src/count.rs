//! Count flags (`--jobs`, `--batch-size`, `--workers`, `--slurm-tasks`, …): whole numbers of at
//! least 1, refused the same way by every binary when they are 0.

/// A clap value parser for a count: `#[arg(long, value_parser = swerve_cli::count)]`. Zero is
/// refused (`invalid value '0' for '--jobs <N>': must be at least 1`) rather than quietly
/// taken as 1.
pub fn count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a whole number")),
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn counts_are_whole_numbers_of_at_least_one() {
        assert_eq!(count("1"), Ok(1));
        assert_eq!(count("16"), Ok(16));
        assert_eq!(count("0"), Err("must be at least 1".to_owned()));
        assert_eq!(count("-1"), Err("`-1` is not a whole number".to_owned()));
        assert_eq!(count("two"), Err("`two` is not a whole number".to_owned()));
    }
}
