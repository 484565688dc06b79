import Foundation
@_spi(Testing) import PrivacyPass

/// The rate-limit tokens (docs/tokens.md): tokens, key lists, public keys, token requests as the issuer parses
/// them and issuance responses as the client does, under a fixed key. The issuer takes at most 2 elements, so an
/// input that gets past its parser costs at most two evaluations and proofs. Every error must be a
/// `PrivacyPassError`.
let tokensTarget = FuzzTarget(
    name: "tokens",
    summary: "tokens, key lists, token requests and issuance responses (PrivacyPass)",
    maximumLength: 4096,
    seeds: {
        let (request, pending) = try tokenFixture.client.begin(count: 2)
        let response = try tokenFixture.issuer.respond(to: request)
        let tokens = try tokenFixture.client.finish(response, pending: pending)
        return [
            request, response, tokens[0].rawRepresentation, tokenFixture.keyList.encoded,
            tokenFixture.keyList.entries[0].publicKey.rawRepresentation,
        ]
    },
    run: { input in
        expectOnly(PrivacyPassError.self, "Token(rawRepresentation:)") { _ = try Token(rawRepresentation: input) }
        expectOnly(PrivacyPassError.self, "KeyList(encoded:)") { _ = try KeyList(encoded: input) }
        expectOnly(PrivacyPassError.self, "VOPRF.PublicKey(rawRepresentation:)") {
            _ = try VOPRF.PublicKey(rawRepresentation: input)
        }
        expectOnly(PrivacyPassError.self, "TokenIssuer.respond(to:)") { _ = try tokenFixture.issuer.respond(to: input) }
        expectOnly(PrivacyPassError.self, "TokenClient.finish") {
            _ = try tokenFixture.client.finish(input, pending: tokenFixture.pending)
        }
        _ = tokenFixture.issuer.verify(rawToken: input)
    })

/// The tokens target's fixed issuer, the client that trusts it, and one pending issuance of 2 tokens.
struct TokenFixture: Sendable {
    let issuer: TokenIssuer
    let keyList: KeyList
    let client: TokenClient
    let pending: TokenClient.PendingIssuance

    init() throws {
        let key = try VOPRF.PrivateKey(rawRepresentation: Data([1]) + Data(count: 31))
        issuer = TokenIssuer(privateKey: key, maximumBatchSize: 2)
        keyList = try KeyList(
            epoch: 1, entries: [try KeyList.Entry(publicKey: key.publicKey, notBefore: 0, notAfter: UInt64.max / 2)])
        client = try TokenClient(publicKey: key.publicKey, keyList: keyList)
        pending = try client.begin(count: 2).pending
    }
}

let tokenFixture: TokenFixture = {
    do {
        return try TokenFixture()
    } catch {
        fatalError("the tokens target's fixed issuer does not set up: \(error)")
    }
}()
