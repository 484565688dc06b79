import Foundation
import SiblingsCrypto

/// expand_message_xmd (RFC 9380 §5.3.1) with SHA-512 (b_in_bytes = 64, s_in_bytes = 128), on SiblingsCrypto's
/// SHA512. libsodium's `crypto_core_ristretto255_from_hash` wants 64 uniform bytes; this makes them.
enum ExpandMessage {
    static func xmdSHA512(_ message: [UInt8], dst: [UInt8], length: Int) throws -> [UInt8] {
        let hashBytes = SHA512.byteCount
        let ell = (length + hashBytes - 1) / hashBytes
        guard ell <= 255, length <= 65_535, length > 0 else {
            throw PrivacyPassError(.invalidInput, "expand_message_xmd cannot make \(length) bytes with SHA-512")
        }
        // Every DST of this suite is short; RFC 9380 §5.3.3's oversize rule is not needed.
        guard !dst.isEmpty, dst.count <= 255 else {
            throw PrivacyPassError(.invalidInput, "a domain separation tag must be 1 to 255 bytes, got \(dst.count)")
        }
        let dstPrime = dst + [UInt8(dst.count)]
        var first = SHA512()
        first.update(data: [UInt8](repeating: 0, count: SHA512.blockByteCount))  // Z_pad
        first.update(data: message)
        first.update(data: [UInt8(length >> 8), UInt8(length & 0xFF), 0])  // I2OSP(len, 2) ‖ I2OSP(0, 1)
        first.update(data: dstPrime)
        let b0 = [UInt8](first.finalize().rawRepresentation)

        var output: [UInt8] = []
        output.reserveCapacity(ell * hashBytes)
        var previous = [UInt8](repeating: 0, count: hashBytes)
        for i in 1...ell {
            var hash = SHA512()
            hash.update(data: zip(b0, previous).map { $0 ^ $1 })  // b_1 uses b0 ⊕ 0 = b0
            hash.update(data: [UInt8(i)])
            hash.update(data: dstPrime)
            previous = [UInt8](hash.finalize().rawRepresentation)
            output += previous
        }
        return Array(output.prefix(length))
    }
}
