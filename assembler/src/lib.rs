//! assembler
