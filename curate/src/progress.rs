//! What a run reports while it goes: the two long stages (reading event files, reading pull
//! requests from their mirrors) with their counts. The library only reports; the `curate`
//! binary draws it (a bar on a terminal, plain lines elsewhere), tests pass `&()`.

/// A run's progress, reported from the stages' worker threads.
pub trait StageProgress: Sync {
    /// Stage `name` (`events`, `clones`) starts with `total` units known so far.
    fn stage(&self, name: &'static str, unit: &'static str, total: u64);
    /// `more` units joined the current stage (the next partition's pull requests).
    fn grow(&self, more: u64);
    /// One unit of the current stage is done.
    fn advance(&self);
    /// The current stage ended.
    fn end(&self);
}

/// No progress shown.
impl StageProgress for () {
    fn stage(&self, _: &'static str, _: &'static str, _: u64) {}
    fn grow(&self, _: u64) {}
    fn advance(&self) {}
    fn end(&self) {}
}
