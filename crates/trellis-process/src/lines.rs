//! Cutting a byte stream into bounded lines, and reading bounded, redacted lines from a pipe.

use std::io::Read;

use crate::redact::{Redactor, StreamRedactor};

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Appended to a line delivered cut.
pub const LINE_CUT_MARKER: &str = "… [line truncated]";

/// One line of a stream, with its newline if it had one. `cut` when the line was longer than
/// the cap: `bytes` holds its first `cap` bytes and the rest was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLine {
    pub bytes: Vec<u8>,
    pub cut: bool,
}

impl RawLine {
    /// The line as text without its line ending; a cut line ends in [`LINE_CUT_MARKER`] and
    /// is at most `max` bytes before it.
    pub fn text(&self, max: usize) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.len() <= max && !self.cut {
            return text.to_owned();
        }
        let mut end = max.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{LINE_CUT_MARKER}", &text[..end])
    }
}

/// Splits bytes into lines of at most `cap` bytes (newline included). Of a longer line only
/// the first `cap` bytes are kept, marked cut, so a writer that never prints a newline cannot
/// exhaust memory.
#[derive(Debug)]
pub struct LineSplitter {
    cap: usize,
    line: Vec<u8>,
    /// Inside the dropped rest of an over-long line.
    skipping: bool,
}

impl LineSplitter {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            line: Vec::new(),
            skipping: false,
        }
    }

    /// The next complete line, consuming from `data` up to its end; `None` once `data` is used
    /// up without completing one (the partial line is kept for the next call).
    pub fn next_line(&mut self, data: &mut &[u8]) -> Option<RawLine> {
        while !data.is_empty() {
            let newline = memchr::memchr(b'\n', data);
            if self.skipping {
                let consumed = newline.map_or(data.len(), |i| i + 1);
                self.skipping = newline.is_none();
                *data = &data[consumed..];
                continue;
            }
            let room = self.cap - self.line.len();
            match newline {
                Some(i) if i < room => {
                    self.line.extend_from_slice(&data[..=i]);
                    *data = &data[i + 1..];
                    return Some(RawLine {
                        bytes: std::mem::take(&mut self.line),
                        cut: false,
                    });
                }
                _ => {
                    let taken = data.len().min(room);
                    self.line.extend_from_slice(&data[..taken]);
                    *data = &data[taken..];
                    if self.line.len() >= self.cap {
                        self.skipping = true;
                        return Some(RawLine {
                            bytes: std::mem::take(&mut self.line),
                            cut: true,
                        });
                    }
                }
            }
        }
        None
    }

    /// The unterminated last line, if any: the stream has ended.
    pub fn finish(&mut self) -> Option<RawLine> {
        (!self.line.is_empty()).then(|| RawLine {
            bytes: std::mem::take(&mut self.line),
            cut: false,
        })
    }
}

/// Redaction then line splitting of one stream: what every reader of a child's pipe does.
#[derive(Debug)]
pub struct LineDecoder {
    redactor: StreamRedactor,
    splitter: LineSplitter,
    decided: Vec<u8>,
    offset: usize,
    ended: bool,
}

impl LineDecoder {
    pub fn new(redactor: &Redactor, cap: usize) -> Self {
        Self {
            redactor: redactor.stream(),
            splitter: LineSplitter::new(cap),
            decided: Vec::new(),
            offset: 0,
            ended: false,
        }
    }

    /// Takes a chunk read from the pipe; call [`LineDecoder::next_line`] until `None` before
    /// feeding the next one.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.compact();
        self.redactor.feed(chunk, &mut self.decided);
    }

    /// The stream has ended: what was held back is decided now.
    pub fn end(&mut self) {
        self.compact();
        self.redactor.finish(&mut self.decided);
        self.ended = true;
    }

    pub fn next_line(&mut self) -> Option<RawLine> {
        let mut rest = &self.decided[self.offset..];
        let before = rest.len();
        let line = self.splitter.next_line(&mut rest);
        self.offset += before - rest.len();
        match line {
            Some(line) => Some(line),
            None if self.ended => self.splitter.finish(),
            None => None,
        }
    }

    fn compact(&mut self) {
        self.decided.drain(..self.offset);
        self.offset = 0;
    }
}

/// Bounded, redacted lines read from a blocking pipe (a long-lived child's stdout or stderr).
pub struct LineReader<R> {
    pipe: R,
    decoder: LineDecoder,
    buffer: Box<[u8]>,
    done: bool,
}

/// Bytes asked of a pipe per read.
const READ_CHUNK: usize = 16 * 1024;

impl<R: Read> LineReader<R> {
    pub fn new(pipe: R, redactor: &Redactor, cap: usize) -> Self {
        Self {
            pipe,
            decoder: LineDecoder::new(redactor, cap),
            buffer: vec![0; READ_CHUNK].into_boxed_slice(),
            done: false,
        }
    }
}

impl<R: Read> Iterator for LineReader<R> {
    type Item = RawLine;

    /// The next line; `None` once the pipe is closed (or fails) and everything was delivered.
    fn next(&mut self) -> Option<RawLine> {
        loop {
            if let Some(line) = self.decoder.next_line() {
                return Some(line);
            }
            if self.done {
                return None;
            }
            match self.pipe.read(&mut self.buffer) {
                Ok(0) | Err(_) => {
                    self.done = true;
                    self.decoder.end();
                }
                Ok(n) => self.decoder.feed(&self.buffer[..n]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8], cap: usize) -> Vec<(String, bool)> {
        LineReader::new(input, &Redactor::default(), cap)
            .map(|l| (String::from_utf8(l.bytes).unwrap(), l.cut))
            .collect()
    }

    #[test]
    fn over_long_lines_are_cut_and_their_rest_dropped() {
        let lines = lines_of(b"short\n0123456789abcdef\nnext\ntail", 8);
        assert_eq!(
            lines,
            [
                ("short\n".to_owned(), false),
                ("01234567".to_owned(), true),
                ("next\n".to_owned(), false),
                ("tail".to_owned(), false),
            ]
        );
        let cut = RawLine {
            bytes: b"01234567".to_vec(),
            cut: true,
        };
        assert_eq!(cut.text(4), "0123… [line truncated]");
        let whole = RawLine {
            bytes: b"0123\n".to_vec(),
            cut: false,
        };
        assert_eq!(whole.text(4), "0123");
    }

    #[test]
    fn a_secret_crossing_the_line_cap_is_masked_before_the_cut() {
        let secret = "s3cr3t-value-that-is-long";
        let mut input = "p".repeat(20).into_bytes();
        input.extend_from_slice(secret.as_bytes());
        input.push(b'\n');
        let redactor = Redactor::new([secret]);
        let lines: Vec<RawLine> = LineReader::new(input.as_slice(), &redactor, 24).collect();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].cut);
        let text = String::from_utf8_lossy(&lines[0].bytes);
        assert_eq!(text, format!("{}[RED", "p".repeat(20)));
        assert!(!text.contains("s3cr"), "{text}");
    }
}
