import Foundation
import SiblingsCrypto
import Testing
import WebAuthn

@Suite("COSE_Key (RFC 9053 §7.1.1)")
struct COSEKeyTests {
    static let point = P256.Signing.PrivateKey().publicKey.rawRepresentation

    static func key(_ overrides: [CBOR: CBOR?]) -> Data {
        var map: [CBOR: CBOR] = [
            CBOR(1): CBOR(2), CBOR(3): CBOR(-7), CBOR(-1): CBOR(1),
            CBOR(-2): .bytes(point.prefix(32)), CBOR(-3): .bytes(point.suffix(32)),
        ]
        for (label, value) in overrides { map[label] = value }
        return CBOR.map(map).encoded()
    }

    @Test("an ES256 key round-trips, and python-fido2 encodes the same key to the same bytes")
    func roundTrip() throws {
        let publicKey = P256.Signing.PrivateKey().publicKey
        let cose = COSEKey(publicKey: publicKey)
        #expect(try COSEKey(cborRepresentation: cose.cborRepresentation).publicKey == publicKey)
        let oracle = try webAuthnOracle()
        #expect(try oracle.bytes("fido2_cose_key", ["public": publicKey.x963Representation]) == cose.cborRepresentation)
        let parsed = try oracle.call("fido2_cose_key", ["cose": cose.cborRepresentation])
        #expect(parsed["algorithm"] as? Int == -7)
        #expect(parsed["public"] as? String == publicKey.x963Representation.hexString)
    }

    @Test("other algorithms, key types and curves are refused as unsupported")
    func unsupported() {
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(3): CBOR(-8)])) }
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(3): CBOR(-257)])) }
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(3): CBOR(-35)])) }
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(1): CBOR(1)])) }
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(1): nil])) }
        expectError(.unsupportedAlgorithm) { try COSEKey(cborRepresentation: Self.key([CBOR(-1): CBOR(2)])) }
        let error = #expect(throws: WebAuthnError.self) {
            try COSEKey(cborRepresentation: Self.key([CBOR(3): CBOR(-8)]))
        }
        #expect(error?.reason.contains("EdDSA") == true)
    }

    @Test("malformed keys are refused: no alg, short coordinates, off-curve point, not a map, bad CBOR")
    func malformed() {
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: Self.key([CBOR(3): nil])) }
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: Self.key([CBOR(3): .text("ES256")])) }
        expectError(.invalidCOSEKey) {
            try COSEKey(cborRepresentation: Self.key([CBOR(-2): .bytes(Self.point.prefix(31))]))
        }
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: Self.key([CBOR(-3): nil])) }
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: Self.key([CBOR(-3): .bytes(Data(count: 32))])) }
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: CBOR.array([]).encoded()) }
        expectError(.invalidCOSEKey) { try COSEKey(cborRepresentation: Self.key([:]) + Data([0])) }
    }
}
