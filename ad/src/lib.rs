//! ad
