/// Branch-free helpers for code that must not branch on secrets.
enum ConstantTime {
    /// 0xFF when `a` and `b` (equal lengths) hold the same bytes, else 0x00, in time that depends only on
    /// the length.
    static func equalMask(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> UInt8 {
        precondition(a.count == b.count)
        var difference: UInt32 = 0
        for index in 0..<a.count { difference |= UInt32(a[index] ^ b[index]) }
        // difference − 1 borrows into the top bits only when difference is 0.
        return UInt8(truncatingIfNeeded: (difference &- 1) >> 8)
    }
}
