import Foundation
import PixieDevice
import PrivacyPass
import SiblingsCrypto
import Storage
import Testing
import Transparency
import TransparencyLog

/// A log that holds `oprf-keys` and answers lookups as identity-svc's `POST /v1/kt/lookup` does.
private struct Log {
    let key = HybridSignature.PrivateKey()
    let sequencer: Sequencer
    var logKey: LogKey { try! LogKey(origin: "test.localhost/kt", publicKey: key.publicKey) }

    init() throws {
        sequencer = try Sequencer(
            database: try SQLiteDatabase.inMemory(), key: key, origin: "test.localhost/kt",
            interval: .milliseconds(1))
    }

    func publish(_ list: KeyList) async throws {
        _ = try await sequencer.append(label: try Label(KeyList.logLabel), value: list.encoded)
    }

    /// A device's verifier over this log; `answer` may rewrite what the server sends.
    func verifier(
        _ answer: @escaping @Sendable (LookupAnswer) -> LookupAnswer? = { $0 }
    ) -> LoggedBindings {
        LoggedBindings(verifier: TransparencyVerifier(logKey: logKey)) { [sequencer] label, since in
            answer(try await sequencer.answer(for: label, since: since))
        }
    }
}

private func keyList(_ keys: [VOPRF.PublicKey], epoch: UInt64 = 1) throws -> KeyList {
    try KeyList(
        epoch: epoch, entries: keys.map { try KeyList.Entry(publicKey: $0, notBefore: 0, notAfter: 4_102_444_800) })
}

private func expectCode<E: Equatable>(
    _ code: E, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record("expected an error \(code), got none", sourceLocation: sourceLocation)
    } catch let error as PrivacyPassError {
        #expect(error.code as? E == code, "\(error)", sourceLocation: sourceLocation)
    } catch let error as TransparencyError {
        #expect(error.code as? E == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("LoggedBindings: the token mint checks the served key list against the log")
struct LoggedBindingsTests {
    @Test func theLoggedSharedKeyMintsTokensThatVerify() async throws {
        let log = try Log()
        let issuer = TokenIssuer(privateKey: VOPRF.PrivateKey())
        let list = try keyList([issuer.publicKey])
        try await log.publish(list)
        let client = try await TokenClient(
            tokenKeyID: issuer.tokenKeyID, servedKeyList: list.encoded, verifier: log.verifier())
        let (request, pending) = try client.begin(count: 4)
        let tokens = try client.finish(try issuer.respond(to: request), pending: pending)
        #expect(tokens.count == 4)
        for token in tokens { #expect(issuer.verify(token)) }
    }

    @Test func aPerUserKeyIsRefusedWhateverListComesWithIt() async throws {
        let log = try Log()
        let shared = VOPRF.PrivateKey().publicKey
        let logged = try keyList([shared])
        try await log.publish(logged)
        let rogue = VOPRF.PrivateKey().publicKey
        // A list naming a key made for this device alone is not the logged list.
        await expectCode(PrivacyPassError.Code.keyNotInList) {
            _ = try await TokenClient(
                tokenKeyID: rogue.tokenKeyID, servedKeyList: try keyList([rogue]).encoded, verifier: log.verifier())
        }
        // Nor is a list with the rogue key slipped in beside the shared one.
        await expectCode(PrivacyPassError.Code.keyNotInList) {
            _ = try await TokenClient(
                tokenKeyID: rogue.tokenKeyID, servedKeyList: try keyList([shared, rogue]).encoded,
                verifier: log.verifier())
        }
        // The real list with the rogue key's id: the key is not in it.
        await expectCode(PrivacyPassError.Code.keyNotInList) {
            _ = try await TokenClient(
                tokenKeyID: rogue.tokenKeyID, servedKeyList: logged.encoded, verifier: log.verifier())
        }
    }

    @Test func itFailsClosedWithoutAProvenList() async throws {
        let log = try Log()
        let key = VOPRF.PrivateKey().publicKey
        let list = try keyList([key])
        // The log proves it holds no list yet.
        await expectCode(PrivacyPassError.Code.keyNotInList) {
            _ = try await TokenClient(tokenKeyID: key.tokenKeyID, servedKeyList: list.encoded, verifier: log.verifier())
        }
        try await log.publish(list)
        // No answer at all, and an answer signed by another log key.
        await expectCode(TransparencyError.Code.missingProof) {
            _ = try await TokenClient(
                tokenKeyID: key.tokenKeyID, servedKeyList: list.encoded, verifier: log.verifier { _ in nil })
        }
        let other = try Log()
        try await other.publish(list)
        let foreign = try await other.sequencer.answer(for: try Label(KeyList.logLabel), since: nil)
        await expectCode(TransparencyError.Code.badSignature) {
            _ = try await TokenClient(
                tokenKeyID: key.tokenKeyID, servedKeyList: list.encoded, verifier: log.verifier { _ in foreign })
        }
    }

    @Test func aNewerListIsFollowedAndAnOlderOneIsRefused() async throws {
        let log = try Log()
        let first = try keyList([VOPRF.PrivateKey().publicKey], epoch: 1)
        try await log.publish(first)
        let verifier = log.verifier()
        #expect(try await verifier.loggedKeyList(matching: first.encoded) == first)
        let pinned = try #require(try TransparencyVerifier(logKey: log.logKey, state: await verifier.state).pinned)

        let second = try keyList([VOPRF.PrivateKey().publicKey], epoch: 2)
        try await log.publish(second)
        #expect(try await verifier.loggedKeyList(matching: second.encoded) == second)
        let moved = try #require(try TransparencyVerifier(logKey: log.logKey, state: await verifier.state).pinned)
        #expect(moved.size > pinned.size)
        // The superseded list is no longer the logged one.
        await expectCode(PrivacyPassError.Code.keyNotInList) {
            _ = try await verifier.loggedKeyList(matching: first.encoded)
        }
    }
}
