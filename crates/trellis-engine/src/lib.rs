//! The reducer: a pure function from (compiled graph, initial input, execution history) to decisions. No I/O, no clock, no async.
