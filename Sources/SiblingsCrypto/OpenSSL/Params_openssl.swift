internal import COpenSSL
import Foundation

/// One `OSSL_PARAM` value to pass to OpenSSL.
enum OpenSSLParameter {
    case utf8(String, String)
    case octets(String, Data)
    case secretOctets(String, SecureBytes)
    case uint64(String, UInt64)
    case uint32(String, UInt32)
    case bignum(String, Data)
}

/// Owns an `OSSL_PARAM` array and every key and value it points to.
///
/// `OSSL_PARAM` entries only point at their keys and values, and OpenSSL reads them during the call
/// they are passed to, so each is copied into memory this object owns for its whole life (Swift's
/// temporary C strings would dangle). Every value is wiped before it is freed: some are keys.
final class OpenSSLParameters {
    let pointer: UnsafeMutablePointer<OSSL_PARAM>
    private var allocations: [UnsafeMutableRawBufferPointer] = []

    init(_ parameters: [OpenSSLParameter]) throws {
        pointer = .allocate(capacity: parameters.count + 1)
        for (index, parameter) in parameters.enumerated() {
            switch parameter {
            case .utf8(let key, let value):
                let bytes = own(Data(value.utf8) + Data([0]))
                pointer[index] = OSSL_PARAM_construct_utf8_string(
                    own(key), bytes.baseAddress!.assumingMemoryBound(to: CChar.self), 0)
            case .octets(let key, let value):
                let bytes = own(value)
                pointer[index] = OSSL_PARAM_construct_octet_string(own(key), bytes.baseAddress, value.count)
            case .secretOctets(let key, let value):
                // Copied straight from the wiped storage: a Data in between would outlive the call unwiped.
                let bytes = value.withUnsafeBytes { own($0) }
                pointer[index] = OSSL_PARAM_construct_octet_string(own(key), bytes.baseAddress, value.count)
            case .uint64(let key, let value):
                let bytes = own(withUnsafeBytes(of: value) { Data($0) })
                pointer[index] = OSSL_PARAM_construct_uint64(
                    own(key), bytes.baseAddress!.assumingMemoryBound(to: UInt64.self))
            case .uint32(let key, let value):
                let bytes = own(withUnsafeBytes(of: value) { Data($0) })
                pointer[index] = OSSL_PARAM_construct_uint(
                    own(key), bytes.baseAddress!.assumingMemoryBound(to: UInt32.self))
            case .bignum(let key, let bigEndian):
                // OSSL_PARAM unsigned integers are in native byte order.
                let native = Data(UInt16(1).littleEndian == 1 ? Data(bigEndian.reversed()) : bigEndian)
                let bytes = own(native)
                pointer[index] = OSSL_PARAM_construct_BN(
                    own(key), bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), native.count)
            }
        }
        pointer[parameters.count] = OSSL_PARAM_construct_end()
    }

    /// A NUL-terminated copy of `key`.
    private func own(_ key: String) -> UnsafePointer<CChar> {
        UnsafePointer(own(Data(key.utf8) + Data([0])).baseAddress!.assumingMemoryBound(to: CChar.self))
    }

    /// A copy of `bytes` (at least one byte long, so its address is never NULL).
    private func own(_ bytes: Data) -> UnsafeMutableRawBufferPointer {
        bytes.withUnsafeBytes { own($0) }
    }

    /// A copy of `source` (at least one byte long), wiped when this object goes away.
    private func own(_ source: UnsafeRawBufferPointer) -> UnsafeMutableRawBufferPointer {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        if let base = source.baseAddress { buffer.baseAddress!.copyMemory(from: base, byteCount: source.count) }
        allocations.append(buffer)
        return buffer
    }

    deinit {
        for buffer in allocations {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
        pointer.deallocate()
    }
}

/// Owns one `BIGNUM`, cleared on free (it may hold a private scalar).
final class BigNumber {
    let pointer: OpaquePointer

    init(bigEndian bytes: Data) throws {
        pointer = try withContiguousBytes(bytes) { base, count in
            try OpenSSLError.check(BN_bin2bn(base, Int32(count), nil), "BN_bin2bn")
        }
    }

    /// The value of `number` as exactly `byteCount` big-endian bytes; throws if it does not fit.
    static func bigEndian(_ number: OpaquePointer?, byteCount: Int) throws -> Data {
        var out = Data(count: byteCount)
        let written = out.withUnsafeMutableBytes { buffer in
            BN_bn2binpad(number, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(byteCount))
        }
        guard written == Int32(byteCount) else {
            throw CryptoError(.invalidEncoding, "a number does not fit in \(byteCount) bytes")
        }
        return out
    }

    deinit { BN_clear_free(pointer) }
}
