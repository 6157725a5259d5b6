//! (being written: issue 12)
