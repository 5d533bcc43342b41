//! Locating and running the real agent CLIs against the model server.
