//! Handing work to a second thread that actually runs alongside the caller: whether a second
//! CPU is there at all, one piece of work beside another, and a long list read in two halves.
//! Every helper gives exactly the result of doing the work on the calling thread.

use std::cell::Cell;
use std::sync::OnceLock;

/// Lists shorter than this are read on the calling thread: a thread costs tens of
/// microseconds, about what reading a few dozen small graph nodes costs (the reference
/// templates stay well below it).
pub const SPLIT_MIN_ITEMS: usize = 64;

/// Stack of a helper thread, as large as a main thread's, so deeply nested documents read the
/// same on either.
const HELPER_STACK_BYTES: usize = 8 << 20;

/// Whether more than one CPU is available to this process (its affinity mask and, in a
/// container, its CPU quota). With a single CPU a second thread only adds switching and the
/// bookkeeping of splitting the work, so the parser and the verifier stay on one thread.
/// Read once: it costs a system call and, in containers, a few file reads.
pub fn second_core() -> bool {
    static SECOND_CORE: OnceLock<bool> = OnceLock::new();
    *SECOND_CORE.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Runs `there` on a second thread while `here` runs on the calling thread, and returns both
/// results. `None` for `there` means it did not run: one CPU only, or no thread could be
/// started. A panic on the second thread is raised again here, as on one thread.
pub fn beside<Here, There>(
    there: impl FnOnce() -> There + Send,
    here: impl FnOnce() -> Here,
) -> (Here, Option<There>)
where
    There: Send,
{
    if !second_core() {
        return (here(), None);
    }
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .stack_size(HELPER_STACK_BYTES)
            .spawn_scoped(scope, there)
            .ok();
        let mine = here();
        let theirs = helper.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (mine, theirs)
    })
}

thread_local! {
    /// False while this thread reads one half of a split list (no nested splitting: the two
    /// threads are already busy).
    static SPLIT_ALLOWED: Cell<bool> = const { Cell::new(true) };
}

/// Forbids splitting on this thread until dropped (then restores the previous setting).
struct NoSplit(bool);

impl NoSplit {
    fn enter() -> Self {
        Self(SPLIT_ALLOWED.replace(false))
    }
}

impl Drop for NoSplit {
    fn drop(&mut self) {
        SPLIT_ALLOWED.set(self.0);
    }
}

/// Reads `items[offset..]` (`part`) in order, stopping at the first error.
fn read_part<Item, T, E>(
    part: &[Item],
    offset: usize,
    read: &(impl Fn(usize, &Item) -> Result<T, E> + Sync),
) -> Result<Vec<T>, E> {
    let _no_split = NoSplit::enter();
    part.iter()
        .enumerate()
        .map(|(i, item)| read(offset + i, item))
        .collect()
}

/// `read` applied to every item with its index, exactly as reading them in order on this
/// thread (the same values, the first error in list order); a list of [`SPLIT_MIN_ITEMS`] or
/// more is read in two halves at once, unless this thread is already reading a half.
pub fn try_map_in_halves<Item, T, E>(
    items: &[Item],
    read: impl Fn(usize, &Item) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    Item: Sync,
    T: Send,
    E: Send,
{
    if items.len() < SPLIT_MIN_ITEMS || !SPLIT_ALLOWED.get() {
        return items
            .iter()
            .enumerate()
            .map(|(i, item)| read(i, item))
            .collect();
    }
    let (first, second) = items.split_at(items.len() / 2);
    let read = &read;
    let (first_values, second_values) = beside(
        || read_part(second, first.len(), read),
        || read_part(first, 0, read),
    );
    let mut values = first_values?;
    // Without a second thread the second half is read here as well.
    let rest = second_values.unwrap_or_else(|| read_part(second, first.len(), read));
    values.extend(rest?);
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached answer is the standard library's, and stays the same.
    #[test]
    fn second_core_follows_available_parallelism() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(second_core(), cpus > 1);
        assert_eq!(second_core(), cpus > 1);
    }

    /// Long lists read in halves give the values, and the first error, of reading in order.
    #[test]
    fn halves_read_like_one_thread() {
        let items: Vec<u32> = (0..200).collect();
        let doubled = try_map_in_halves(&items, |i, n| {
            assert_eq!(i as u32, *n);
            Ok::<_, usize>(n * 2)
        });
        assert_eq!(doubled, Ok(items.iter().map(|n| n * 2).collect()));
        for bad in [[10, 180], [120, 150], [99, 100], [0, 199]] {
            let first_error =
                try_map_in_halves(
                    &items,
                    |i, n| if bad.contains(&i) { Err(i) } else { Ok(*n) },
                );
            assert_eq!(first_error, Err(bad[0]), "{bad:?}");
        }
        let short: Vec<u32> = (0..3).collect();
        assert_eq!(try_map_in_halves(&short, |_, n| Ok::<_, ()>(*n)), Ok(short));
    }

    /// A half does not split again: nested lists are read on the thread reading the half.
    #[test]
    fn halves_do_not_split_again() {
        let outer: Vec<Vec<u32>> = (0..100).map(|i| (i..i + 100).collect()).collect();
        let sums = try_map_in_halves(&outer, |_, inner| {
            let allowed = SPLIT_ALLOWED.get();
            let values = try_map_in_halves(inner, |_, n| Ok::<_, ()>(*n))?;
            Ok::<_, ()>((allowed, values.iter().sum::<u32>()))
        });
        let sums = sums.unwrap_or_default();
        assert_eq!(sums.len(), 100);
        assert!(sums.iter().all(|(allowed, _)| !allowed));
        assert_eq!(sums[3].1, (3..103).sum::<u32>());
        assert!(SPLIT_ALLOWED.get(), "restored after the split");
    }

    /// The second thread's work runs when a second CPU is there, and its panic reaches the
    /// caller.
    #[test]
    fn beside_runs_both_and_reraises_panics() {
        let (here, there) = beside(|| 2, || 1);
        assert_eq!(here, 1);
        assert_eq!(there, second_core().then_some(2));
        if second_core() {
            let caught = std::panic::catch_unwind(|| beside(|| panic!("helper"), || 1));
            assert!(caught.is_err());
        }
    }
}
