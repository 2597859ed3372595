//! Batch clearing (SPEEDEX §4–5, appendices B, C, D, G).
