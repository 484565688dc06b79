import SystemCalls

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads and writes on a file descriptor straight from and into the pipeline's buffers, with no `Data` per
/// call (what `FileHandle.read(upToCount:)` and `write(contentsOf:)` would allocate).
enum FileDescriptorIO {
    /// Reads up to `buffer.count` bytes; 0 only at the end. Retries when interrupted.
    static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        let count = retryingInterrupts { systemRead(descriptor, base, buffer.count) }
        guard count >= 0 else { throw Errno(errno) }
        return count
    }

    /// Writes all of `bytes`. Retries when interrupted or partly written.
    static func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let count = retryingInterrupts { systemWrite(descriptor, base + offset, bytes.count - offset) }
            guard count >= 0 else { throw Errno(errno) }
            offset += count
        }
    }

    /// An `errno` value, with the system's message for it.
    struct Errno: Error, CustomStringConvertible {
        let code: Int32
        init(_ code: Int32) { self.code = code }
        var description: String { String(cString: strerror(code)) }
    }
}

private func systemRead(_ descriptor: Int32, _ base: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, base, count)
}

private func systemWrite(_ descriptor: Int32, _ base: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, base, count)
}
