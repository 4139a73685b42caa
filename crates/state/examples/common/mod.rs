//! What the state examples share: the objects they store.

/// Object `i` at `generation`, `size` bytes of JSON.
pub fn object(i: u64, generation: u64, size: usize) -> String {
    let head = format!(
        "{{\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"ns-{}\",\"generation\":{generation}}},\"data\":\"",
        i % 50
    );
    let pad = size - head.len() - 2;
    format!("{head}{}\"}}", "x".repeat(pad))
}
