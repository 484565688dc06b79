import Foundation

extension DataProtocol {
    /// These bytes as `Data`: free when they already are `Data`, one bulk copy otherwise (the generic
    /// `Data.init(_: some Sequence)` copies byte by byte).
    var asData: Data {
        if let data = self as? Data { return data }
        var out = Data(capacity: count)
        for region in regions {
            region.withUnsafeBytes { buffer in
                if let base = buffer.baseAddress {
                    out.append(base.assumingMemoryBound(to: UInt8.self), count: buffer.count)
                }
            }
        }
        return out
    }
}

extension Data {
    /// Overwrites these bytes with zeros (`OPENSSL_cleanse`), for a secret that had to pass through a
    /// `Data` (the opened plaintext of an HPKE message, say); call it on every path, `defer` included.
    package mutating func cleanse() {
        withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) }
    }

    /// `count` bytes written by `body`, without first zero-filling them (the output of a cipher is
    /// written in full; zero-filling a megabyte first costs a third of sealing it). If `body` throws,
    /// whatever it wrote is wiped before the memory is freed.
    static func uninitialized(count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows -> Data {
        guard count > 0 else {
            try body(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            return Data()
        }
        guard let memory = malloc(count) else { fatalError("out of memory allocating \(count) bytes") }
        let buffer = UnsafeMutableRawBufferPointer(start: memory, count: count)
        do {
            try body(buffer)
        } catch {
            OpenSSLMemory.cleanse(buffer)
            free(memory)
            throw error
        }
        return Data(bytesNoCopy: memory, count: count, deallocator: .free)
    }
}
