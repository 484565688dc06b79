import Foundation
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import Testing

/// Token issuance and verification, the wire encodings, and the key list.
@Suite struct TokenTests {
    let issuer = TokenIssuer(privateKey: VOPRF.PrivateKey())

    func keyList(_ keys: [VOPRF.PublicKey], epoch: UInt64 = 3) throws -> KeyList {
        try KeyList(
            epoch: epoch, entries: keys.map { try KeyList.Entry(publicKey: $0, notBefore: 0, notAfter: .max / 2) })
    }

    func mint(_ count: Int, challenge: Data = Token.defaultChallenge) throws -> [Token] {
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([issuer.publicKey]))
        let (request, pending) = try client.begin(count: count, challenge: challenge)
        return try client.finish(issuer.respond(to: request), pending: pending)
    }

    @Test func mintedTokensVerify() throws {
        let tokens = try mint(4)
        #expect(tokens.count == 4)
        #expect(Set(tokens.map(\.nonce)).count == 4)
        for token in tokens {
            #expect(token.rawRepresentation.count == 162)
            #expect(token.tokenKeyID == SHA256.hash(data: issuer.publicKey.rawRepresentation).rawRepresentation)
            #expect(issuer.verify(token))
            #expect(issuer.verify(rawToken: token.rawRepresentation))
            #expect(try Token(rawRepresentation: token.rawRepresentation) == token)
        }
    }

    @Test func encodingsAreAsDocumented() throws {
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([issuer.publicKey]))
        let (request, pending) = try client.begin(count: 3)
        #expect(request.count == 2 + 32 + 2 + 3 * 32)
        #expect(Array(request.prefix(2)) == [0xF1, 0xA7])
        #expect(request[2..<34] == issuer.tokenKeyID)
        #expect(Array(request[34..<36]) == [0, 3])
        let response = try issuer.respond(to: request)
        #expect(response.count == 2 + 3 * 32 + 64)
        #expect(Array(response.prefix(2)) == [0, 3])
        let token = try client.finish(response, pending: pending)[0]
        let raw = token.rawRepresentation
        #expect(Array(raw.prefix(2)) == [0xF1, 0xA7])
        #expect(raw[2..<34] == token.nonce)
        #expect(raw[34..<66] == SHA256.hash(data: Token.defaultChallenge).rawRepresentation)
        #expect(raw[66..<98] == issuer.tokenKeyID)
        #expect(raw[98...] == token.authenticator)
        // The authenticator is the VOPRF output on the first 98 bytes.
        #expect(
            try VOPRF.Server(mode: .voprf, privateKey: issuer.privateKey).evaluate(raw.prefix(98))
                == token.authenticator)
    }

    @Test func tamperedTokensFail() throws {
        let token = try #require(try mint(1).first)
        let raw = token.rawRepresentation
        for index in [0, 1, 2, 33, 34, 65, 66, 97, 98, 161] {
            var bad = raw
            bad[index] ^= 0x80
            #expect(!issuer.verify(rawToken: bad), "flipped byte \(index)")
        }
        #expect(!issuer.verify(rawToken: raw.dropLast()))
        // Another nonce with the same authenticator.
        var otherNonce = raw
        otherNonce.replaceSubrange(2..<34, with: Data(repeating: 9, count: 32))
        #expect(!issuer.verify(rawToken: otherNonce))
        // Another issuer (another key id and key).
        #expect(!TokenIssuer(privateKey: VOPRF.PrivateKey()).verify(token))
        // The right key but another challenge.
        #expect(!issuer.verify(token, challenge: Data("another origin".utf8)))
        expectCode(.malformedMessage) { _ = try Token(rawRepresentation: raw.dropLast()) }
        var wrongType = raw
        wrongType[0] = 0
        expectCode(.malformedMessage) { _ = try Token(rawRepresentation: wrongType) }
    }

    @Test func tokenForAnotherKeyIDFails() throws {
        let token = try #require(try mint(1).first)
        var raw = token.rawRepresentation
        let other = VOPRF.PrivateKey().publicKey.tokenKeyID
        raw.replaceSubrange(66..<98, with: other)
        #expect(!issuer.verify(rawToken: raw))
    }

    @Test func callerChallengeIsBound() throws {
        let challenge = Data("relay frame".utf8)
        let token = try #require(try mint(1, challenge: challenge).first)
        #expect(issuer.verify(token, challenge: challenge))
        #expect(!issuer.verify(token))
    }

    @Test func badResponsesAreRefused() throws {
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([issuer.publicKey]))
        let (request, pending) = try client.begin(count: 2)
        let response = try issuer.respond(to: request)
        var badProof = response
        badProof[badProof.count - 1] ^= 1
        expectCode(.proofVerificationFailed) { _ = try client.finish(badProof, pending: pending) }
        var badElement = response
        badElement.replaceSubrange(2..<34, with: Data(count: 32))
        expectCode(.invalidElement) { _ = try client.finish(badElement, pending: pending) }
        expectCode(.malformedMessage) { _ = try client.finish(response.dropLast(), pending: pending) }
        // A well-formed response for another batch size.
        let (three, _) = try client.begin(count: 3)
        expectCode(.batchSizeMismatch) { _ = try client.finish(issuer.respond(to: three), pending: pending) }
        // An issuer with another key answering: the proof does not verify under the listed key.
        let impostor = TokenIssuer(privateKey: VOPRF.PrivateKey())
        var retargeted = request
        retargeted.replaceSubrange(2..<34, with: impostor.tokenKeyID)
        expectCode(.proofVerificationFailed) {
            _ = try client.finish(impostor.respond(to: retargeted), pending: pending)
        }
    }

    @Test func badRequestsAreRefused() throws {
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([issuer.publicKey]))
        let (request, _) = try client.begin(count: 2)
        expectCode(.malformedMessage) { _ = try issuer.respond(to: request.dropLast()) }
        expectCode(.malformedMessage) { _ = try issuer.respond(to: Data(count: 10)) }
        var identity = request
        identity.replaceSubrange(36..<68, with: Data(count: 32))
        expectCode(.invalidElement) { _ = try issuer.respond(to: identity) }
        let other = TokenIssuer(privateKey: VOPRF.PrivateKey())
        expectCode(.unknownKey) { _ = try other.respond(to: request) }
        let (big, _) = try client.begin(count: 65)
        expectCode(.malformedMessage) { _ = try issuer.respond(to: big) }
    }

    /// The issuer sees blinded elements only: none equals, or is a fixed function of, a token's nonce, input or
    /// authenticator, and minting the same batch twice shows different elements.
    @Test func issuerSeesOnlyBlindedElements() throws {
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([issuer.publicKey]))
        let (request, pending) = try client.begin(count: 4)
        let seen = (0..<4).map { request[36 + $0 * 32..<68 + $0 * 32] }
        let tokens = try client.finish(issuer.respond(to: request), pending: pending)
        for token in tokens {
            for element in seen {
                #expect(Data(element) != token.nonce)
                #expect(token.rawRepresentation.range(of: Data(element)) == nil)
            }
        }
    }

    @Test func keyListGatesTheClient() throws {
        let other = VOPRF.PrivateKey().publicKey
        expectCode(.keyNotInList) { _ = try TokenClient(publicKey: issuer.publicKey, keyList: keyList([other])) }
        let expired = try KeyList(
            epoch: 1, entries: [try KeyList.Entry(publicKey: issuer.publicKey, notBefore: 10, notAfter: 20)])
        expectCode(.keyNotInList) { _ = try TokenClient(publicKey: issuer.publicKey, keyList: expired) }
        _ = try TokenClient(publicKey: issuer.publicKey, keyList: expired, now: Date(timeIntervalSince1970: 15))
    }

    @Test func keyListEncodingIsCanonical() throws {
        let keys = (0..<3).map { _ in VOPRF.PrivateKey().publicKey }
        let list = try keyList(keys, epoch: 42)
        let encoded = list.encoded
        #expect(encoded.count == 13 + 3 * 80)
        #expect(Array(encoded.prefix(3)) == [1, 0xF1, 0xA7])
        #expect(try KeyList(encoded: encoded) == list)
        #expect(try keyList(keys.reversed(), epoch: 42).encoded == encoded, "order of construction does not matter")
        let ids = (0..<3).map { encoded[13 + $0 * 80..<45 + $0 * 80] }
        #expect(ids.map { Array($0) } == ids.map { Array($0) }.sorted { $0.lexicographicallyPrecedes($1) })
        expectCode(.malformedMessage) { _ = try KeyList(encoded: encoded + Data([0])) }
        expectCode(.malformedMessage) { _ = try KeyList(encoded: encoded.dropLast()) }
        var swapped = encoded
        swapped.replaceSubrange(13..<93, with: encoded[93..<173])
        swapped.replaceSubrange(93..<173, with: encoded[13..<93])
        expectCode(.malformedMessage) { _ = try KeyList(encoded: swapped) }
        var wrongID = encoded
        wrongID[13] ^= 1
        expectCode(.malformedMessage) { _ = try KeyList(encoded: wrongID) }
        var version = encoded
        version[0] = 2
        expectCode(.malformedMessage) { _ = try KeyList(encoded: version) }
        expectCode(.invalidInput) { _ = try KeyList(epoch: 1, entries: []) }
        let entry = try KeyList.Entry(publicKey: keys[0], notBefore: 0, notAfter: 1)
        expectCode(.invalidInput) { _ = try KeyList(epoch: 1, entries: [entry, entry]) }
        #expect(KeyList.logLabel == "oprf-keys")
    }
}
