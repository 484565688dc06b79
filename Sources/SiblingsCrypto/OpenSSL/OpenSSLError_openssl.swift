internal import COpenSSL
import Foundation

/// Turns OpenSSL return codes into ``CryptoError``s, with OpenSSL's error queue as the reason.
enum OpenSSLError {
    /// Drains OpenSSL's thread-local error queue into one line.
    static func drainQueue() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let end = buffer.firstIndex(of: 0) ?? buffer.count
            messages.append(String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no detail in OpenSSL's error queue" : messages.joined(separator: "; ")
    }

    /// The error for a failed call to `function`.
    static func failure(
        _ function: @autoclosure () -> String, file: String = #fileID, line: UInt = #line
    )
        -> CryptoError
    {
        CryptoError(.underlyingLibrary, "\(function()) failed: \(drainQueue())", file: file, line: line)
    }

    /// Throws unless `result` is 1, OpenSSL's success value for nearly every EVP call.
    /// (`function` names the call for the error message; it is only built when the call failed.)
    static func check(
        _ result: Int32, _ function: @autoclosure () -> String, file: String = #fileID, line: UInt = #line
    ) throws {
        guard result == 1 else { throw failure(function(), file: file, line: line) }
    }

    /// Returns `pointer`, or throws if OpenSSL returned NULL.
    static func check<T>(
        _ pointer: T?, _ function: @autoclosure () -> String, file: String = #fileID, line: UInt = #line
    ) throws -> T {
        guard let pointer else { throw failure(function(), file: file, line: line) }
        return pointer
    }

    /// Discards whatever a failed call left in the queue, when the failure was expected and reported
    /// otherwise (a signature that does not verify, for example).
    static func clearQueue() {
        ERR_clear_error()
    }
}

/// OpenSSL's CSPRNG.
enum OpenSSLRandom {
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, Int(Int32.max))
            let result = RAND_bytes(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk))
            precondition(result == 1, "OpenSSL's CSPRNG failed (\(OpenSSLError.drainQueue())); refusing to continue")
            offset += chunk
        }
    }
}

/// Memory helpers that must not be optimised into data-dependent code.
enum OpenSSLMemory {
    static func constantTimeEqual(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        precondition(lhs.count == rhs.count)
        guard lhs.count > 0 else { return true }
        return CRYPTO_memcmp(lhs.baseAddress, rhs.baseAddress, lhs.count) == 0
    }

    static func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
    }
}

/// Calls `body` with `buffer`'s base address, or the address of a zero byte when `buffer` is empty
/// and has none.
func withNonNullBase<R>(_ buffer: UnsafeRawBufferPointer, _ body: (UnsafeRawPointer, Int) throws -> R) rethrows -> R {
    if let base = buffer.baseAddress { return try body(base, buffer.count) }
    return try withUnsafeBytes(of: UInt8(0)) { empty in try body(empty.baseAddress!, 0) }
}

/// Calls `body` with a pointer to `data`'s bytes, contiguous, and never NULL (OpenSSL treats a NULL
/// input as "no input" in some calls and as an error in others; an empty buffer with a valid
/// address is accepted everywhere).
func withContiguousBytes<R>(
    _ data: some DataProtocol, _ body: (UnsafePointer<UInt8>, Int) throws -> R
) rethrows -> R {
    // One region (Data, a slice, a buffer pointer): its own bytes, with no copy, so a secret passed in
    // from wiped memory is not copied into a Data that nobody wipes.
    if data.regions.count == 1, let region = data.regions.first {
        return try region.withUnsafeBytes { buffer in
            try withNonNullBase(buffer) { base, count in try body(base.assumingMemoryBound(to: UInt8.self), count) }
        }
    }
    let bytes = data.asData
    return try bytes.withUnsafeBytes { buffer in
        try withNonNullBase(buffer) { base, count in try body(base.assumingMemoryBound(to: UInt8.self), count) }
    }
}
