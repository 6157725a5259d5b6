//! SKELETON: owned by the issue-15 work on `plot`.
