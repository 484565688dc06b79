import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("HMAC")
struct HMACTests {
    @Test("HMAC-SHA-256/384/512 agree with pyca/cryptography, keys of every length class")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            // Empty, short, block-sized and longer-than-block keys (long keys are hashed first).
            let key = randomBytes([0, 16, 64, 128, 200].randomElement()!)
            let message = randomBytes(randomLength(0...500))
            let symmetric = SymmetricKey(data: key)
            #expect(
                HMAC<SHA256>.authenticationCode(for: message, using: symmetric).rawRepresentation
                    == (try oracle.bytes("hmac", ["hash": "sha256", "key": key, "message": message])))
            #expect(
                HMAC<SHA384>.authenticationCode(for: message, using: symmetric).rawRepresentation
                    == (try oracle.bytes("hmac", ["hash": "sha384", "key": key, "message": message])))
            #expect(
                HMAC<SHA512>.authenticationCode(for: message, using: symmetric).rawRepresentation
                    == (try oracle.bytes("hmac", ["hash": "sha512", "key": key, "message": message])))
        }
    }

    @Test("validation is exact: one flipped bit or a truncated code is refused")
    func validation() {
        let key = SymmetricKey(size: .bits256)
        let message = Data("message".utf8)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: key)
        #expect(HMAC<SHA256>.isValidAuthenticationCode(code.rawRepresentation, authenticating: message, using: key))
        var flipped = code.rawRepresentation
        flipped[5] ^= 0x01
        #expect(!HMAC<SHA256>.isValidAuthenticationCode(flipped, authenticating: message, using: key))
        #expect(
            !HMAC<SHA256>.isValidAuthenticationCode(
                code.rawRepresentation.prefix(16), authenticating: message, using: key))
        #expect(
            !HMAC<SHA256>.isValidAuthenticationCode(
                code.rawRepresentation, authenticating: Data("messagf".utf8), using: key))
    }

    @Test("incremental equals one-shot; copies continue independently")
    func incremental() {
        let key = SymmetricKey(size: .bits256)
        var mac = HMAC<SHA256>(key: key)
        mac.update(data: Data("hello ".utf8))
        let copy = mac
        mac.update(data: Data("world".utf8))
        #expect(mac.finalize() == HMAC<SHA256>.authenticationCode(for: Data("hello world".utf8), using: key))
        #expect(copy.finalize() == HMAC<SHA256>.authenticationCode(for: Data("hello ".utf8), using: key))
    }
}
