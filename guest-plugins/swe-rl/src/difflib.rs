//! A port of the parts of CPython's `difflib` (PSF licence) that the reward depends on:
//! `SequenceMatcher` (matching blocks, opcodes, grouped opcodes, ratio) and the body of
//! `unified_diff`.
//!
//! The algorithm is CPython 3.10–3.13's, step for step, because the reward is defined by the
//! exact blocks it finds: which longest block wins, and how ties are broken, decides the blocks
//! found later and so the ratio and the hunks. Do not swap in another LCS or diff algorithm.
//!
//! Differences from CPython that cannot change a result:
//! - there is no `isjunk` argument, so the junk set is always empty and CPython's two
//!   junk-extension passes in `find_longest_match` are provably no-ops; they are left out;
//! - elements are interned to dense `u32` ids before matching (equality of ids is equality of
//!   elements), and the `j2len` dictionaries are one flat array of runs stored over per-row
//!   bases (`Scratch`), never cleared;
//! - a row whose runs cannot beat the best block (they are at most one longer than the previous
//!   row's) is written without looking for its longest run;
//! - `find_longest_match` finds the indices of `b2j[a[i]]` inside `[blo, bhi)` by binary search,
//!   and walks them downwards, keeping the row's longest run at its smallest `j` (which is what
//!   CPython's upward walk with a strict `>` ends up with);
//! - when no element is popular, a block of 16 or more elements is found from seeds (windows of
//!   8 elements of `a` looked up in a hash of `b`'s windows and grown to maximal runs), and only
//!   shorter blocks go through the dynamic programme. Without popular elements CPython's block
//!   is the longest maximal run that ends first in `a`, then in `b`, and the seeds find every
//!   run that long (`seeded_longest_match` says why).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Whether the "popular element" heuristic of CPython's `autojunk` is applied to `b`.
///
/// With [`Autojunk::On`] and `len(b) >= 200`, every element occurring more than
/// `len(b) / 100 + 1` times in `b` cannot seed or continue a match in the dynamic programme,
/// although the extension step may still cross it. Popular elements are not junk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Autojunk {
    /// No popular-element filter (`autojunk=False`).
    Off,
    /// CPython's default (`autojunk=True`).
    On,
}

/// A matching block: `a[a..a + size] == b[b..b + size]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    /// Start index in `a`.
    pub a: usize,
    /// Start index in `b`.
    pub b: usize,
    /// Length of the block.
    pub size: usize,
}

/// The kind of an [`Opcode`], as in CPython's `get_opcodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tag {
    /// `a[i1..i2]` should be replaced by `b[j1..j2]`.
    Replace,
    /// `a[i1..i2]` should be deleted (`j1 == j2`).
    Delete,
    /// `b[j1..j2]` should be inserted at `a[i1]` (`i1 == i2`).
    Insert,
    /// `a[i1..i2] == b[j1..j2]`.
    Equal,
}

/// One edit operation over half-open ranges `a[i1..i2]` and `b[j1..j2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode {
    /// What the operation does.
    pub tag: Tag,
    /// Start in `a`.
    pub i1: usize,
    /// End in `a` (exclusive).
    pub i2: usize,
    /// Start in `b`.
    pub j1: usize,
    /// End in `b` (exclusive).
    pub j2: usize,
}

/// Id given to elements of `a` that never occur in `b`; it equals no id of `b`.
const NOT_IN_B: u32 = u32::MAX;

/// CPython's `SequenceMatcher(None, a, b, autojunk)`, over any hashable elements.
///
/// The sequences are interned on construction (`b2j` is built then, as in CPython's
/// `set_seqs`); the queries allocate their own scratch space and do not cache results, so call
/// [`SequenceMatcher::matching_blocks`] once and derive the rest from it where that matters.
#[derive(Debug, Clone)]
pub struct SequenceMatcher {
    /// Element ids of `a`; [`NOT_IN_B`] for elements absent from `b`.
    a: Vec<u32>,
    /// Element ids of `b`, dense from 0.
    b: Vec<u32>,
    /// Per id: the range of `b2j_indices` that lists its ascending indices in `b` (empty for
    /// popular elements).
    b2j_ranges: Vec<(u32, u32)>,
    /// The concatenated index lists of `b2j`.
    b2j_indices: Vec<u32>,
    /// Whether blocks may be found from seeds ([`Seeds`]): not when some element is popular
    /// (then a block may not seed a match, and only the dynamic programme gives CPython's
    /// result), nor when `b` is too short for seeds to pay.
    seedable: bool,
}

impl SequenceMatcher {
    /// Prepares a matcher for `a` against `b` (CPython's `__chain_b`).
    ///
    /// # Panics
    ///
    /// If either sequence has `u32::MAX` elements or more.
    pub fn new<T: Eq + Hash + Copy>(a: &[T], b: &[T], autojunk: Autojunk) -> Self {
        assert!(
            a.len() < NOT_IN_B as usize && b.len() < NOT_IN_B as usize,
            "sequence too long for SequenceMatcher"
        );
        let mut ids: HashMap<T, u32, BuildHasherDefault<FxHasher>> =
            HashMap::with_capacity_and_hasher(b.len().min(1024), Default::default());
        let b_ids: Vec<u32> = b
            .iter()
            .map(|&x| {
                let next = ids.len() as u32;
                *ids.entry(x).or_insert(next)
            })
            .collect();
        let a_ids: Vec<u32> = a
            .iter()
            .map(|x| ids.get(x).copied().unwrap_or(NOT_IN_B))
            .collect();
        Self::from_ids(a_ids, b_ids, ids.len(), autojunk)
    }

    /// [`SequenceMatcher::new`] over the code points of two strings, interning ASCII without
    /// hashing (the character-level similarity's case).
    pub(crate) fn for_chars(a: &str, b: &str, autojunk: Autojunk) -> Self {
        const ASCII: u32 = 128;
        let mut others: HashMap<char, u32, BuildHasherDefault<FxHasher>> = HashMap::default();
        // One id per code point: ASCII bytes are their own ids, read a byte at a time; other
        // characters are decoded and numbered from 128 in order of first appearance. The
        // vectors are sized for the byte length (at least the code-point count), so they never
        // grow.
        let mut ids_of = |text: &str| {
            let mut ids = Vec::with_capacity(text.len());
            let mut rest = text;
            while !rest.is_empty() {
                let ascii = rest.bytes().take_while(u8::is_ascii).count();
                ids.extend(rest.as_bytes()[..ascii].iter().map(|&byte| u32::from(byte)));
                rest = &rest[ascii..];
                let mut chars = rest.chars();
                if let Some(c) = chars.next() {
                    let next = ASCII + others.len() as u32;
                    ids.push(*others.entry(c).or_insert(next));
                    rest = chars.as_str();
                }
            }
            ids
        };
        let b_ids = ids_of(b);
        let a_ids = ids_of(a);
        assert!(
            a_ids.len() < NOT_IN_B as usize && b_ids.len() < NOT_IN_B as usize,
            "sequence too long for SequenceMatcher"
        );
        let alphabet = ASCII as usize + others.len();
        Self::from_ids(a_ids, b_ids, alphabet, autojunk)
    }

    /// Builds `b2j` in compressed form from interned sequences: ids of `b` are below
    /// `alphabet`; ids of `a` are below it too or [`NOT_IN_B`]; equal ids mean equal elements.
    fn from_ids(a: Vec<u32>, b: Vec<u32>, alphabet: usize, autojunk: Autojunk) -> Self {
        // Counting sort of b's indices by id: ranges[id] = (start, end) into b2j_indices.
        let mut starts = vec![0u32; alphabet + 1];
        for &id in &b {
            starts[id as usize + 1] += 1;
        }
        for id in 0..alphabet {
            starts[id + 1] += starts[id];
        }
        let mut fill = starts.clone();
        let mut b2j_indices = vec![0u32; b.len()];
        for (j, &id) in b.iter().enumerate() {
            let slot = &mut fill[id as usize];
            b2j_indices[*slot as usize] = j as u32;
            *slot += 1;
        }
        let popular_above = match autojunk {
            Autojunk::On if b.len() >= 200 => Some(b.len() / 100 + 1),
            _ => None,
        };
        let mut any_popular = false;
        let b2j_ranges = (0..alphabet)
            .map(|id| {
                let (start, end) = (starts[id], starts[id + 1]);
                match popular_above {
                    Some(ntest) if (end - start) as usize > ntest => {
                        any_popular = true;
                        (start, start)
                    }
                    _ => (start, end),
                }
            })
            .collect();
        let seedable = !any_popular && b.len() >= MIN_SEEDED_LEN as usize;
        Self {
            a,
            b,
            b2j_ranges,
            b2j_indices,
            seedable,
        }
    }

    /// Length of `a`.
    pub fn len_a(&self) -> usize {
        self.a.len()
    }

    /// Length of `b`.
    pub fn len_b(&self) -> usize {
        self.b.len()
    }

    /// CPython's `find_longest_match(alo, ahi, blo, bhi)`: the longest block of
    /// `a[alo..ahi]` × `b[blo..bhi]`, ties going to the smallest `a` index, then the smallest `b`
    /// index; `(alo, blo, 0)` when nothing matches.
    ///
    /// # Panics
    ///
    /// If a range is reversed or out of bounds.
    pub fn find_longest_match(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Match {
        assert!(alo <= ahi && ahi <= self.a.len() && blo <= bhi && bhi <= self.b.len());
        let mut scratch = Scratch::new(self.b.len());
        let (i, j, k) =
            self.longest_match(&mut scratch, alo as u32, ahi as u32, blo as u32, bhi as u32);
        Match {
            a: i as usize,
            b: j as usize,
            size: k as usize,
        }
    }

    /// `find_longest_match` over the matcher's scratch rows: from seeds where they can settle
    /// it (long blocks), otherwise by CPython's dynamic programme.
    fn longest_match(
        &self,
        scratch: &mut Scratch,
        alo: u32,
        ahi: u32,
        blo: u32,
        bhi: u32,
    ) -> (u32, u32, u32) {
        // Small ranges: the dynamic programme visits few cells.
        let cells = u64::from(ahi - alo) * u64::from(bhi - blo);
        if self.seedable && cells >= DP_ONLY_CELLS {
            let seeds = scratch.seeds.get_or_insert_with(|| Seeds::new(&self.b));
            if let Some(found) = self.seeded_longest_match(seeds, alo, ahi, blo, bhi) {
                return found;
            }
        }
        self.dp_longest_match(scratch, alo, ahi, blo, bhi)
    }

    /// The longest block from seeds, when it is at least [`MIN_SEEDED_LEN`] long; `None` when
    /// it is shorter, which the dynamic programme then settles.
    ///
    /// Only valid when no element is popular: then the dynamic programme's best block is the
    /// first, in order of its end in `a` and then in `b`, of the longest maximal common runs of
    /// `a[alo..ahi]` and `b[blo..bhi]` (a run that could grow would give a longer one). Equal
    /// lengths make that the smallest start in `a`, then in `b`.
    ///
    /// Guessing a length `len`, every run of at least `len` elements covers one of the windows
    /// of [`SEED`] elements that start `len - SEED + 1` apart in `a`; each window's occurrences
    /// in `b` are grown to maximal runs. When the longest is at least `len`, every run as long
    /// was among them and the answer is exact; otherwise the guess halves. The guesses start at
    /// the shorter range's length, so a run is looked at only a few times per guess: the
    /// previous guess, twice as long, found none as long as it.
    fn seeded_longest_match(
        &self,
        seeds: &Seeds,
        alo: u32,
        ahi: u32,
        blo: u32,
        bhi: u32,
    ) -> Option<(u32, u32, u32)> {
        let (a, b) = (&self.a, &self.b);
        let mut guess = (ahi - alo).min(bhi - blo);
        while guess >= MIN_SEEDED_LEN {
            let step = (guess - SEED + 1) as usize;
            // (length, start in a, start in b) of the best run so far.
            let mut best = (0u32, 0u32, 0u32);
            for p in (alo..=ahi - SEED).step_by(step) {
                let window = &a[p as usize..(p + SEED) as usize];
                let Some(key) = seed_key(window) else {
                    continue;
                };
                let mut t = seeds.heads[seeds.bucket(key)];
                while t != NO_SEED && t + SEED <= bhi {
                    let next = seeds.next[t as usize];
                    if t >= blo && &b[t as usize..(t + SEED) as usize] == window {
                        let (mut s, mut u) = (p, t);
                        while s > alo && u > blo && a[s as usize - 1] == b[u as usize - 1] {
                            s -= 1;
                            u -= 1;
                        }
                        let (mut e, mut v) = (p + SEED, t + SEED);
                        while e < ahi && v < bhi && a[e as usize] == b[v as usize] {
                            e += 1;
                            v += 1;
                        }
                        let run = (e - s, s, u);
                        if run.0 > best.0 || (run.0 == best.0 && (run.1, run.2) < (best.1, best.2))
                        {
                            best = run;
                        }
                    }
                    t = next;
                }
            }
            if best.0 >= guess {
                return Some((best.1, best.2, best.0));
            }
            // No run reaches the guess. The longest found bounds the answer from below: when it
            // is over half the guess, one more pass at its length settles it.
            guess = (guess / 2).max(best.0);
        }
        None
    }

    /// CPython's dynamic programme for `find_longest_match`, over the scratch rows.
    // In wasm this is its own function: inlined into `raw_blocks`, its loops share Cranelift's
    // registers with the whole caller and keep their values on the stack.
    #[cfg_attr(target_arch = "wasm32", inline(never))]
    fn dp_longest_match(
        &self,
        scratch: &mut Scratch,
        alo: u32,
        ahi: u32,
        blo: u32,
        bhi: u32,
    ) -> (u32, u32, u32) {
        let (a, b) = (&self.a, &self.b);
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0u32);
        let mut floor = scratch.begin(ahi - alo);
        let cells = &mut scratch.cells;
        // A bound on the previous row's longest run. A row's runs are at most one longer than
        // the previous row's, so a row can only improve the best block when `reach` is at
        // least `bestsize`; other rows are written without finding their longest run.
        let mut reach = 0u32;
        for i in alo..ahi {
            let id = a[i as usize];
            if id != NOT_IN_B {
                let (start, end) = self.b2j_ranges[id as usize];
                let js = &self.b2j_indices[start as usize..end as usize];
                // Most calls cover all of b: check the ends before searching.
                let lo = match js.first() {
                    Some(&j) if j >= blo => 0,
                    _ => js.partition_point(|&j| j < blo),
                };
                let hi = match js.last() {
                    Some(&j) if j < bhi => js.len(),
                    _ => lo + js[lo..].partition_point(|&j| j < bhi),
                };
                let js = &js[lo..hi];
                if reach < bestsize {
                    row_runs::<false>(js, cells, floor);
                    reach += 1;
                } else {
                    let top = row_runs::<true>(js, cells, floor);
                    // The row's runs are its cells' values less its base.
                    let row_best = (top - (floor + ROW)) as u32;
                    reach = row_best;
                    if row_best > bestsize {
                        // CPython keeps the first (smallest) j reaching the row's longest run.
                        let row_j = js
                            .iter()
                            .copied()
                            .find(|&j| cells[j as usize + 1] == top)
                            .expect("the row's longest run ends at one of its indices");
                        besti = i + 1 - row_best;
                        bestj = row_j + 1 - row_best;
                        bestsize = row_best;
                    }
                }
            } else {
                reach = 0;
            }
            floor += ROW;
        }
        scratch.floor = floor + ROW;
        // Extend over equal neighbours; this may cross popular elements.
        while besti > alo && bestj > blo && a[besti as usize - 1] == b[bestj as usize - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && a[(besti + bestsize) as usize] == b[(bestj + bestsize) as usize]
        {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }

    /// The raw (unsorted, unmerged) blocks found by CPython's divide-and-conquer.
    fn raw_blocks(&self) -> Vec<(u32, u32, u32)> {
        let mut scratch = Scratch::new(self.b.len());
        let mut blocks = Vec::new();
        let mut stack = vec![(0u32, self.a.len() as u32, 0u32, self.b.len() as u32)];
        while let Some((alo, ahi, blo, bhi)) = stack.pop() {
            let (i, j, k) = self.longest_match(&mut scratch, alo, ahi, blo, bhi);
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    stack.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    stack.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks
    }

    /// CPython's `get_matching_blocks()`: sorted, adjacent blocks merged, ending with the
    /// sentinel `(len(a), len(b), 0)`.
    pub fn matching_blocks(&self) -> Vec<Match> {
        let mut raw = self.raw_blocks();
        raw.sort_unstable();
        let mut blocks: Vec<Match> = Vec::with_capacity(raw.len() + 1);
        let mut current = Match {
            a: 0,
            b: 0,
            size: 0,
        };
        for (i, j, k) in raw {
            let (i, j, k) = (i as usize, j as usize, k as usize);
            if current.a + current.size == i && current.b + current.size == j {
                current.size += k;
            } else {
                if current.size > 0 {
                    blocks.push(current);
                }
                current = Match {
                    a: i,
                    b: j,
                    size: k,
                };
            }
        }
        if current.size > 0 {
            blocks.push(current);
        }
        blocks.push(Match {
            a: self.a.len(),
            b: self.b.len(),
            size: 0,
        });
        blocks
    }

    /// `M`, the number of matched elements: the sum of the matching-block sizes.
    pub fn matches(&self) -> usize {
        self.raw_blocks().iter().map(|&(_, _, k)| k as usize).sum()
    }

    /// CPython's `ratio()`: `2.0 * M / (len(a) + len(b))`, or 1.0 when both are empty.
    pub fn ratio(&self) -> f64 {
        ratio_of(self.matches(), self.a.len() + self.b.len())
    }

    /// CPython's `get_opcodes()`.
    pub fn opcodes(&self) -> Vec<Opcode> {
        opcodes_from_blocks(&self.matching_blocks())
    }

    /// CPython's `get_grouped_opcodes(n)`: hunks with up to `n` elements of context.
    pub fn grouped_opcodes(&self, n: usize) -> Vec<Vec<Opcode>> {
        group_opcodes(self.opcodes(), n)
    }
}

/// `2.0 * matches / total`, or 1.0 when `total` is 0, rounded exactly as CPython does (both
/// integer conversions are exact below 2^53 and the division is correctly rounded).
pub(crate) fn ratio_of(matches: usize, total: usize) -> f64 {
    if total == 0 {
        1.0
    } else {
        (2.0 * matches as f64) / (total as f64)
    }
}

/// Turns matching blocks (with their sentinel) into opcodes.
fn opcodes_from_blocks(blocks: &[Match]) -> Vec<Opcode> {
    let (mut i, mut j) = (0, 0);
    let mut codes = Vec::with_capacity(blocks.len() * 2);
    for m in blocks {
        let tag = match (i < m.a, j < m.b) {
            (true, true) => Some(Tag::Replace),
            (true, false) => Some(Tag::Delete),
            (false, true) => Some(Tag::Insert),
            (false, false) => None,
        };
        if let Some(tag) = tag {
            codes.push(Opcode {
                tag,
                i1: i,
                i2: m.a,
                j1: j,
                j2: m.b,
            });
        }
        i = m.a + m.size;
        j = m.b + m.size;
        if m.size > 0 {
            codes.push(Opcode {
                tag: Tag::Equal,
                i1: m.a,
                i2: i,
                j1: m.b,
                j2: j,
            });
        }
    }
    codes
}

/// CPython's `get_grouped_opcodes` over precomputed opcodes.
fn group_opcodes(mut codes: Vec<Opcode>, n: usize) -> Vec<Vec<Opcode>> {
    if codes.is_empty() {
        codes.push(Opcode {
            tag: Tag::Equal,
            i1: 0,
            i2: 1,
            j1: 0,
            j2: 1,
        });
    }
    if let Some(first) = codes.first_mut().filter(|c| c.tag == Tag::Equal) {
        first.i1 = first.i1.max(first.i2.saturating_sub(n));
        first.j1 = first.j1.max(first.j2.saturating_sub(n));
    }
    if let Some(last) = codes.last_mut().filter(|c| c.tag == Tag::Equal) {
        last.i2 = last.i2.min(last.i1 + n);
        last.j2 = last.j2.min(last.j1 + n);
    }
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for mut code in codes {
        if code.tag == Tag::Equal && code.i2 - code.i1 > 2 * n {
            group.push(Opcode {
                i2: code.i2.min(code.i1 + n),
                j2: code.j2.min(code.j1 + n),
                ..code
            });
            groups.push(std::mem::take(&mut group));
            code.i1 = code.i1.max(code.i2.saturating_sub(n));
            code.j1 = code.j1.max(code.j2.saturating_sub(n));
        }
        group.push(code);
    }
    let only_context = matches!(group.as_slice(), [code] if code.tag == Tag::Equal);
    if !group.is_empty() && !only_context {
        groups.push(group);
    }
    groups
}

/// The lines of CPython's `difflib.unified_diff(a, b, n=context, lineterm="")` without the two
/// file-header lines, joined with `"\n"` (no trailing newline); `""` when nothing differs.
///
/// The line matcher runs with autojunk on, as `unified_diff` does.
pub(crate) fn unified_diff_body(a: &[&str], b: &[&str], context: usize) -> String {
    let (ta, tb): (Vec<Text>, Vec<Text>) = (
        a.iter().map(|l| Text(l)).collect(),
        b.iter().map(|l| Text(l)).collect(),
    );
    let matcher = SequenceMatcher::new(&ta, &tb, Autojunk::On);
    let groups = matcher.grouped_opcodes(context);
    let mut out = String::new();
    for group in &groups {
        let (first, last) = (group[0], group[group.len() - 1]);
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("@@ -");
        push_range(&mut out, first.i1, last.i2);
        out.push_str(" +");
        push_range(&mut out, first.j1, last.j2);
        out.push_str(" @@");
        for code in group {
            if code.tag == Tag::Equal {
                push_lines(&mut out, ' ', &a[code.i1..code.i2]);
                continue;
            }
            if matches!(code.tag, Tag::Replace | Tag::Delete) {
                push_lines(&mut out, '-', &a[code.i1..code.i2]);
            }
            if matches!(code.tag, Tag::Replace | Tag::Insert) {
                push_lines(&mut out, '+', &b[code.j1..code.j2]);
            }
        }
    }
    out
}

fn push_lines(out: &mut String, prefix: char, lines: &[&str]) {
    for line in lines {
        out.push('\n');
        out.push(prefix);
        out.push_str(line);
    }
}

/// CPython's `_format_range_unified(start, stop)`: `5`, `7,0`, `1,4`.
fn push_range(out: &mut String, start: usize, stop: usize) {
    let length = stop - start;
    // Writing to a String cannot fail.
    let _ = match length {
        1 => write!(out, "{}", start + 1),
        0 => write!(out, "{start},0"),
        _ => write!(out, "{},{length}", start + 1),
    };
}

/// One row of `find_longest_match`'s dynamic programme: for each `j` of `js` (the indices in `b`
/// of `a[i]`, ascending), the run ending at `j` is one longer than the run the previous row
/// recorded ending at `j - 1`. With `TOP`, returns the largest value the row wrote (see
/// [`Scratch`]); without, the row is only written (and the return value is meaningless).
///
/// A cell read at or below `floor` (the previous row's base) belongs to an older row and means
/// no run, so the run ending at `j` is stored as `max(cells[j], floor) + ROW + 1`: one more
/// than the previous row's run, on this row's base `floor + ROW`. Walking downwards lets one
/// array hold both rows: the cell read for `j` (the run ending at `j - 1`) is only overwritten
/// later, when `j - 1` is processed. The row tracks its largest value only; the caller finds
/// where it ends when it improves the best block, which is rare. With the base's step a
/// constant, the loop keeps few values live: in wasm, where the fuel check's call inside the
/// loop makes Cranelift keep values live across it on the stack, each one is a reload per step.
#[inline]
fn row_runs<const TOP: bool>(js: &[u32], cells: &mut [u64], floor: u64) -> u64 {
    let mut top = floor + ROW;
    // Two views of the cells, shifted by one and of the same length, so that one bounds check
    // covers both the read of `cells[j]` and the write of `cells[j + 1]`.
    let cells = Cell::from_mut(cells).as_slice_of_cells();
    let (ending_before, ending_at) = (&cells[..cells.len() - 1], &cells[1..]);
    let mut step = |j: u32| {
        let run = ending_before[j as usize].get().max(floor) + (ROW + 1);
        ending_at[j as usize].set(run);
        if TOP {
            top = top.max(run);
        }
    };
    // Four indices per loop iteration, highest first: the same steps in the same order, with
    // a quarter of the loop's overhead (in wasm, its fuel and epoch checks).
    let mut rest = js;
    while let [head @ .., j0, j1, j2, j3] = rest {
        step(*j3);
        step(*j2);
        step(*j1);
        step(*j0);
        rest = head;
    }
    // The last three or fewer without a loop (no checks in wasm).
    match *rest {
        [j0, j1, j2] => {
            step(j2);
            step(j1);
            step(j0);
        }
        [j0, j1] => {
            step(j1);
            step(j0);
        }
        [j0] => step(j0),
        _ => {}
    }
    top
}

/// Elements per seed window.
const SEED: u32 = 8;

/// The shortest block looked for from seeds; shorter ones are left to the dynamic programme.
const MIN_SEEDED_LEN: u32 = 16;

/// Below this many cells (`len_a · len_b`), `find_longest_match` goes straight to the dynamic
/// programme.
const DP_ONLY_CELLS: u64 = 4096;

/// End of a chain of [`Seeds`].
const NO_SEED: u32 = u32::MAX;

/// The windows of [`SEED`] elements of `b`, chained by hash in ascending order of position.
#[derive(Debug, Clone)]
struct Seeds {
    /// Per hash bucket: the first window's position, or [`NO_SEED`].
    heads: Vec<u32>,
    /// Per window position: the next position in its bucket, or [`NO_SEED`].
    next: Vec<u32>,
    /// `64 - log2(buckets)`: a key's bucket is its top bits after mixing.
    shift: u32,
}

impl Seeds {
    fn new(b: &[u32]) -> Self {
        let windows = b.len() + 1 - SEED as usize;
        // At least two buckets, so that the shift stays below 64.
        let buckets = windows.next_power_of_two().max(2);
        let shift = 64 - buckets.trailing_zeros();
        let mut seeds = Self {
            heads: vec![NO_SEED; buckets],
            next: vec![NO_SEED; windows],
            shift,
        };
        // The keys of every window, rolled along `b` (see `seed_key`), chained from the last
        // window down so that each chain lists positions in ascending order.
        let top = SEED_BASE.wrapping_pow(SEED);
        let mut keys = Vec::with_capacity(windows);
        let mut key = seed_key(&b[..SEED as usize]).expect("b's ids are all in b");
        keys.push(key);
        for (&gone, &came) in b.iter().zip(&b[SEED as usize..]) {
            key = key
                .wrapping_mul(SEED_BASE)
                .wrapping_add(u64::from(came))
                .wrapping_sub(u64::from(gone).wrapping_mul(top));
            keys.push(key);
        }
        for (t, &key) in keys.iter().enumerate().rev() {
            let bucket = seeds.bucket(key);
            let head = &mut seeds.heads[bucket];
            seeds.next[t] = *head;
            *head = t as u32;
        }
        seeds
    }

    /// The bucket of a key: its top bits after an odd multiplication, which depend on all of
    /// its bits.
    fn bucket(&self, key: u64) -> usize {
        (key.wrapping_mul(FxHasher::SEED) >> self.shift) as usize
    }
}

/// The multiplier of [`seed_key`]'s polynomial (odd).
const SEED_BASE: u64 = 0x9e37_79b9_7f4a_7c15;

/// A window's key: its ids as a polynomial in [`SEED_BASE`] modulo 2^64, which can be rolled
/// one element along in O(1); `None` when the window holds an element absent from `b`.
#[inline]
fn seed_key(window: &[u32]) -> Option<u64> {
    let mut key = 0u64;
    for &id in window {
        if id == NOT_IN_B {
            return None;
        }
        key = key.wrapping_mul(SEED_BASE).wrapping_add(u64::from(id));
    }
    Some(key)
}

/// How far each row's base lies above the previous row's: more than any run (runs are shorter
/// than `b`, whose length is below `u32::MAX`).
const ROW: u64 = 1 << 32;

/// The `j2len` rows of `find_longest_match`, reused across calls without ever being cleared.
///
/// `cells[j + 1]` holds the run ending at `j` as an offset over the base of the row that wrote
/// it. Each row's base is [`ROW`] above its predecessor's, so every value written before the
/// previous row is at most the previous row's base (the row's `floor`) and reads as no run.
/// Each call starts above every value written so far.
#[derive(Debug)]
struct Scratch {
    cells: Vec<u64>,
    /// No cell holds more than this.
    floor: u64,
    /// `b`'s seeds, built by the first call that looks for a block from seeds.
    seeds: Option<Seeds>,
}

impl Scratch {
    fn new(len_b: usize) -> Self {
        Self {
            cells: vec![0; len_b + 1],
            floor: 0,
            seeds: None,
        }
    }

    /// Starts a call of `rows` rows; returns the first row's `floor`.
    fn begin(&mut self, rows: u32) -> u64 {
        // The call's values stay below `floor + (rows + 1) · ROW`, which is where the next call
        // starts; (2^32 − 1) · 2^32 fits in a u64, so from 0 every call fits.
        let needed = (u64::from(rows) + 1) << 32;
        if self.floor.checked_add(needed).is_none() {
            self.cells.fill(0);
            self.floor = 0;
        }
        self.floor
    }
}

/// A line as a hash-map key: the same equality and hash as `&str`, with the bytes compared a
/// word at a time ([`same_text`]).
#[derive(Debug, Clone, Copy)]
struct Text<'a>(&'a str);

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        same_text(self.0, other.0)
    }
}

impl Eq for Text<'_> {}

impl Hash for Text<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// `a == b`, comparing eight bytes at a time. In the wasm build `==` on strings calls the C
/// library's `memcmp`, which compares one byte at a time; this loop is several times faster
/// there, and as fast as `memcmp` natively for the lines and files compared here.
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = wa.remainder().iter().eq(wb.remainder());
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    tails_equal && wa.zip(wb).all(|(x, y)| word(x) == word(y))
}

/// The Fx hash (as in rustc): fast for the small keys interned here (chars, line slices).
/// Inputs are model outputs, not adversarial network traffic, so DoS resistance is not needed.
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The tail as a little-endian word padded with zeros, built without a copy of
            // variable length (in wasm, a `memory.copy` and so a call out to the host).
            let word = rest
                .iter()
                .rev()
                .fold(0u64, |word, &byte| (word << 8) | u64::from(byte));
            self.add(word);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_is_string_equality() {
        for len in 0..24 {
            let a = "x".repeat(len);
            assert!(same_text(&a, &a.clone()));
            assert!(!same_text(&a, &format!("{a}x")));
            for at in 0..len {
                let mut b = a.clone().into_bytes();
                b[at] = b'y';
                let b = String::from_utf8(b).unwrap();
                assert!(!same_text(&a, &b), "length {len}, difference at {at}");
            }
        }
    }

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    fn blocks(a: &str, b: &str, autojunk: Autojunk) -> Vec<(usize, usize, usize)> {
        SequenceMatcher::new(&chars(a), &chars(b), autojunk)
            .matching_blocks()
            .iter()
            .map(|m| (m.a, m.b, m.size))
            .collect()
    }

    #[test]
    fn matching_blocks_match_cpython() {
        // Expected values from CPython 3.11's SequenceMatcher(None, a, b, autojunk=False).
        fn check(a: &str, b: &str, expect: &[(usize, usize, usize)]) {
            assert_eq!(blocks(a, b, Autojunk::Off), expect, "a={a:?} b={b:?}");
        }
        check("", "", &[(0, 0, 0)]);
        check("abc", "", &[(3, 0, 0)]);
        check("", "abc", &[(0, 3, 0)]);
        check("abxcd", "abcd", &[(0, 0, 2), (3, 2, 2), (5, 4, 0)]);
        check("qabxcd", "abycdf", &[(1, 0, 2), (4, 3, 2), (6, 6, 0)]);
        // Ties: the earliest block in a wins, then the earliest in b.
        check("ab", "ba", &[(0, 1, 1), (2, 2, 0)]);
        check("aXa", "a", &[(0, 0, 1), (3, 1, 0)]);
        check("a", "aXa", &[(0, 0, 1), (1, 3, 0)]);
        check("abcab", "cabab", &[(2, 0, 3), (5, 5, 0)]);
    }

    #[test]
    fn find_longest_match_ties_and_ranges() {
        let m = SequenceMatcher::new(&chars(" abcd"), &chars("abcd abcd"), Autojunk::Off);
        // The CPython docs' example: ties go to the smallest i, then smallest j.
        assert_eq!(
            m.find_longest_match(0, 5, 0, 9),
            Match {
                a: 0,
                b: 4,
                size: 5
            }
        );
        assert_eq!(
            m.find_longest_match(1, 5, 0, 9),
            Match {
                a: 1,
                b: 0,
                size: 4
            }
        );
        assert_eq!(
            m.find_longest_match(1, 5, 1, 9),
            Match {
                a: 1,
                b: 5,
                size: 4
            }
        );
        assert_eq!(
            m.find_longest_match(1, 5, 6, 9),
            Match {
                a: 2,
                b: 6,
                size: 3
            }
        );
        assert_eq!(
            m.find_longest_match(0, 0, 0, 9),
            Match {
                a: 0,
                b: 0,
                size: 0
            }
        );
        let none = SequenceMatcher::new(&chars("xyz"), &chars("abc"), Autojunk::Off);
        assert_eq!(
            none.find_longest_match(1, 3, 2, 3),
            Match {
                a: 1,
                b: 2,
                size: 0
            }
        );
    }

    #[test]
    fn popular_elements_only_from_200() {
        // b = 199 or 200 elements of which "x" makes up far more than 1%.
        for (lb, expect_popular) in [(199, false), (200, true)] {
            let b: Vec<u32> = (0..lb).map(|j| if j % 2 == 0 { 0 } else { j }).collect();
            let a = vec![0u32, 0, 0];
            let on = SequenceMatcher::new(&a, &b, Autojunk::On);
            let off = SequenceMatcher::new(&a, &b, Autojunk::Off);
            // The 0s cannot seed a match when popular; extension from (0, 0) still finds one.
            assert_eq!(
                on.matching_blocks()[0],
                Match {
                    a: 0,
                    b: 0,
                    size: 1
                }
            );
            assert_eq!(
                off.matching_blocks()[0],
                Match {
                    a: 0,
                    b: 0,
                    size: 1
                }
            );
            let m = on.find_longest_match(1, 3, 1, lb as usize);
            let expect = if expect_popular {
                Match {
                    a: 1,
                    b: 1,
                    size: 0,
                }
            } else {
                Match {
                    a: 1,
                    b: 2,
                    size: 1,
                }
            };
            assert_eq!(m, expect, "lb={lb}");
        }
    }

    #[test]
    fn popular_threshold_is_strictly_more_than_ntest() {
        // lb = 300: ntest = 4. An element with 4 occurrences stays, with 5 it is popular.
        for (count, popular) in [(4usize, false), (5, true)] {
            let mut b: Vec<u32> = (1..=300).collect();
            for slot in b.iter_mut().take(count) {
                *slot = 0;
            }
            let m = SequenceMatcher::new(&[1000u32, 0], &b, Autojunk::On);
            let found = m.find_longest_match(0, 2, 0, 300);
            assert_eq!(found.size == 0, popular, "count={count}");
        }
    }

    #[test]
    fn char_interning_agrees_with_generic() {
        let texts = [
            "",
            "abc",
            "héllo wörld 😀",
            "😀😀a",
            "ab\u{301}c",
            "κόσμε",
            "a b  c",
        ];
        for a in texts {
            for b in texts {
                let generic = SequenceMatcher::new(&chars(a), &chars(b), Autojunk::Off);
                let direct = SequenceMatcher::for_chars(a, b, Autojunk::Off);
                assert_eq!(
                    generic.matching_blocks(),
                    direct.matching_blocks(),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    /// CPython's `find_longest_match` as written there: a fresh `j2len` dictionary per row,
    /// `b2j` walked upwards, a strict `>` (no junk, popular elements dropped from `b2j`).
    fn literal_longest_match(
        a: &[u32],
        b: &[u32],
        b2j: &HashMap<u32, Vec<usize>>,
        (alo, ahi, blo, bhi): (usize, usize, usize, usize),
    ) -> (usize, usize, usize) {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        for (i, x) in a.iter().enumerate().take(ahi).skip(alo) {
            let mut newj2len = HashMap::new();
            for &j in b2j.get(x).map_or(&[][..], Vec::as_slice) {
                if j < blo {
                    continue;
                }
                if j >= bhi {
                    break;
                }
                let k = j
                    .checked_sub(1)
                    .and_then(|p| j2len.get(&p))
                    .copied()
                    .unwrap_or(0)
                    + 1;
                newj2len.insert(j, k);
                if k > bestsize {
                    (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                }
            }
            j2len = newj2len;
        }
        while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
            (besti, bestj, bestsize) = (besti - 1, bestj - 1, bestsize + 1);
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && a[besti + bestsize] == b[bestj + bestsize]
        {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }

    /// CPython's `get_matching_blocks` over [`literal_longest_match`], before merging.
    fn literal_blocks(a: &[u32], b: &[u32], autojunk: Autojunk) -> Vec<(usize, usize, usize)> {
        let mut b2j: HashMap<u32, Vec<usize>> = HashMap::new();
        for (j, &x) in b.iter().enumerate() {
            b2j.entry(x).or_default().push(j);
        }
        if autojunk == Autojunk::On && b.len() >= 200 {
            let ntest = b.len() / 100 + 1;
            b2j.retain(|_, js| js.len() <= ntest);
        }
        let mut queue = vec![(0, a.len(), 0, b.len())];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = literal_longest_match(a, b, &b2j, (alo, ahi, blo, bhi));
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks.sort_unstable();
        blocks
    }

    /// Random sequences over small alphabets (long runs, many ties, many calls sharing one
    /// scratch row array), against the literal algorithm: the same blocks, in every case.
    #[test]
    fn blocks_agree_with_the_literal_algorithm() {
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1d);
        for case in 0..600 {
            let alphabet = [2, 3, 5, 30][case % 4];
            let len_a = next(if case % 5 == 0 { 400 } else { 60 }) as usize;
            let len_b = next(if case % 7 == 0 { 400 } else { 60 }) as usize;
            let a: Vec<u32> = (0..len_a).map(|_| next(alphabet) as u32).collect();
            // Half the cases edit a copy of `a`, so that long blocks exist.
            let b: Vec<u32> = if case % 2 == 0 {
                let mut b = Vec::new();
                for &x in &a {
                    match next(16) {
                        0 => {}
                        1 => b.push(next(alphabet) as u32),
                        2 => b.extend([x, next(alphabet) as u32]),
                        _ => b.push(x),
                    }
                }
                b
            } else {
                (0..len_b).map(|_| next(alphabet) as u32).collect()
            };
            for autojunk in [Autojunk::Off, Autojunk::On] {
                let ours: Vec<(usize, usize, usize)> = {
                    let mut raw = SequenceMatcher::new(&a, &b, autojunk).raw_blocks();
                    raw.sort_unstable();
                    raw.into_iter()
                        .map(|(i, j, k)| (i as usize, j as usize, k as usize))
                        .collect()
                };
                assert_eq!(
                    ours,
                    literal_blocks(&a, &b, autojunk),
                    "case {case} ({autojunk:?}): a={a:?} b={b:?}"
                );
            }
        }
    }

    /// Long shared runs, repeated chunks (equal blocks, so ties) and periodic texts, where the
    /// seeded search settles most calls: the same blocks as the literal algorithm, and the
    /// seeded search does settle some of them.
    #[test]
    fn seeded_search_agrees_with_the_literal_algorithm() {
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15);
        let mut seeded_calls = 0;
        for case in 0..160 {
            let alphabet = [3, 4, 30, 100][case % 4];
            let len = 100 + next(300) as usize;
            let a: Vec<u32> = if case % 6 == 5 {
                // A periodic text: every shift of the period ties.
                let period = 1 + next(9) as usize;
                let unit: Vec<u32> = (0..period).map(|_| next(alphabet) as u32).collect();
                unit.iter().copied().cycle().take(len).collect()
            } else {
                (0..len).map(|_| next(alphabet) as u32).collect()
            };
            let rate = [8, 32, 128, 1024][(case / 4) % 4];
            let mut b = Vec::new();
            for (i, &x) in a.iter().enumerate() {
                match next(rate) {
                    0 => {}
                    1 => b.push(next(alphabet) as u32),
                    2 if i >= 60 => {
                        // Repeat an earlier chunk of `a`: the same block twice in `b`.
                        let start = next(i as u64 - 40) as usize;
                        b.extend_from_slice(&a[start..start + 20 + next(20) as usize]);
                        b.push(x);
                    }
                    _ => b.push(x),
                }
            }
            let (a, b) = if case % 3 == 0 { (b, a) } else { (a, b) };
            let matcher = SequenceMatcher::new(&a, &b, Autojunk::Off);
            if matcher.seedable {
                let (la, lb) = (a.len() as u32, b.len() as u32);
                let seeds = Seeds::new(&matcher.b);
                seeded_calls +=
                    usize::from(matcher.seeded_longest_match(&seeds, 0, la, 0, lb).is_some());
            }
            let mut raw = matcher.raw_blocks();
            raw.sort_unstable();
            let ours: Vec<(usize, usize, usize)> = raw
                .into_iter()
                .map(|(i, j, k)| (i as usize, j as usize, k as usize))
                .collect();
            assert_eq!(
                ours,
                literal_blocks(&a, &b, Autojunk::Off),
                "case {case}: a={a:?} b={b:?}"
            );
        }
        assert!(
            seeded_calls > 80,
            "the seeded search settled only {seeded_calls} whole-range calls"
        );
    }

    #[test]
    fn ratio_and_matches() {
        fn check(a: &str, b: &str, expect_m: usize, expect_ratio: f64) {
            let m = SequenceMatcher::new(&chars(a), &chars(b), Autojunk::Off);
            assert_eq!(m.matches(), expect_m, "a={a:?} b={b:?}");
            assert_eq!(
                m.ratio().to_bits(),
                expect_ratio.to_bits(),
                "a={a:?} b={b:?}"
            );
        }
        check("", "", 0, 1.0);
        check("abcd", "bcde", 3, 0.75);
        check(
            "private Thread currentThread;",
            "private volatile Thread currentThread;",
            29,
            0.8656716417910447,
        );
        check("😀é", "é😀", 1, 0.5);
    }

    #[test]
    fn opcodes_match_cpython() {
        let m = SequenceMatcher::new(&chars("qabxcd"), &chars("abycdf"), Autojunk::Off);
        let got: Vec<_> = m
            .opcodes()
            .iter()
            .map(|c| (c.tag, c.i1, c.i2, c.j1, c.j2))
            .collect();
        use Tag::*;
        assert_eq!(
            got,
            [
                (Delete, 0, 1, 0, 0),
                (Equal, 1, 3, 0, 2),
                (Replace, 3, 4, 2, 3),
                (Equal, 4, 6, 3, 5),
                (Insert, 6, 6, 5, 6)
            ]
        );
    }

    #[test]
    fn unified_diff_bodies() {
        fn check(a: &str, b: &str, expect: &str) {
            let a: Vec<&str> = if a.is_empty() {
                vec![]
            } else {
                a.split('\n').collect()
            };
            let b: Vec<&str> = if b.is_empty() {
                vec![]
            } else {
                b.split('\n').collect()
            };
            assert_eq!(unified_diff_body(&a, &b, 3), expect, "a={a:?} b={b:?}");
        }
        check("", "", "");
        check("x\ny", "x\ny", "");
        check("", "one", "@@ -0,0 +1 @@\n+one");
        check("a\nb", "", "@@ -1,2 +0,0 @@\n-a\n-b");
        check(
            "1\n2\n3\n4\n5\n6\n7",
            "1\n2\n3\n4\n5\n6\n7\nx",
            "@@ -5,3 +5,4 @@\n 5\n 6\n 7\n+x",
        );
        check(
            "1\n2\n3\n4\n5\n6\n7",
            "0\n1\n2\n3\n4\n5\n6\n7",
            "@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3",
        );
        check("a\nb\nc", "a\nB\nc", "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c");
        check(
            "1\n2\n3\n4\n5\n6\n7\n8\n9",
            "1\n2\n3\n4\nX\n6\n7\n8\n9",
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+X\n 6\n 7\n 8",
        );
        // Equal runs longer than 2n split hunks; runs of exactly 2n do not.
        check(
            "a\n1\n2\n3\n4\n5\n6\n7\nb",
            "A\n1\n2\n3\n4\n5\n6\n7\nB",
            "@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B",
        );
        check(
            "a\n1\n2\n3\n4\n5\n6\nb",
            "A\n1\n2\n3\n4\n5\n6\nB",
            "@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B",
        );
        // Replace: all '-' lines before all '+' lines.
        check("x\ny", "p\nq", "@@ -1,2 +1,2 @@\n-x\n-y\n+p\n+q");
    }

    #[test]
    fn range_formatting() {
        fn check(start: usize, stop: usize, expect: &str) {
            let mut out = String::new();
            push_range(&mut out, start, stop);
            assert_eq!(out, expect);
        }
        check(0, 0, "0,0");
        check(7, 7, "7,0");
        check(0, 2, "1,2");
        check(4, 5, "5");
        check(0, 4, "1,4");
    }
}
