//! placeholder: the egress guard (issue 5).
