import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("Relay frames: byte layout and strict decoding")
struct RelayFrameTests {
    let subject = try! RelaySubject(rawRepresentation: Data((0..<32).map { UInt8($0) }))

    @Test("SEND and DELIVER are laid out as docs/pixie-protocol.md says")
    func layout() throws {
        let send = RelayClientFrame.send(
            requestID: 0x0102_0304, subject: subject, wake: .sync, token: Data([0xAA, 0xBB]), payload: Data([0xCC]))
        let expected =
            Data([0x03, 1, 2, 3, 4]) + subject.rawRepresentation + Data([0x01, 0x00, 0x02, 0xAA, 0xBB, 0xCC])
        #expect(send.encoded() == expected)
        #expect(try RelayClientFrame(decoding: expected) == send)

        let deliver = RelayServerFrame.deliver(subject: subject, wake: .silent, payload: Data([9, 9]))
        #expect(deliver.encoded() == Data([0x81]) + subject.rawRepresentation + Data([0x00, 9, 9]))
        let error = RelayServerFrame.error(requestID: 7, code: .tokenSpent, reason: "spent")
        #expect(error.encoded() == Data([0x83, 0, 0, 0, 7, 0, 4]) + Data("spent".utf8))
        #expect(RelayServerFrame.ok(requestID: 258).encoded() == Data([0x82, 0, 0, 1, 2]))
    }

    @Test("every frame survives a round trip")
    func roundTrip() throws {
        let client: [RelayClientFrame] = [
            .subscribe(
                requestID: 1, subject: subject, publicKey: Data(repeating: 3, count: 32),
                signature: Data(repeating: 4, count: 64), pushToken: Data()),
            .subscribe(
                requestID: 2, subject: subject, publicKey: Data(repeating: 5, count: 32),
                signature: Data(repeating: 6, count: 64), pushToken: Data(repeating: 1, count: 512)),
            .unsubscribe(requestID: 3, subject: subject),
            .send(requestID: 4, subject: subject, wake: .silent, token: Data([1]), payload: Data()),
            .ping(requestID: .max),
        ]
        for frame in client { #expect(try RelayClientFrame(decoding: frame.encoded()) == frame) }
        let server: [RelayServerFrame] = [
            .deliver(subject: subject, wake: .sync, payload: Data(repeating: 2, count: 1024)),
            .ok(requestID: 0), .error(requestID: 5, code: RelayErrorCode(rawValue: 999), reason: "é"),
            .challenge(nonce: Data(repeating: 7, count: 32)),
        ]
        for frame in server { #expect(try RelayServerFrame(decoding: frame.encoded()) == frame) }
    }

    @Test("strict: wrong lengths, unknown types and wake classes are refused with the request id")
    func strict() {
        let id = Data([0, 0, 0, 9])
        let raw = subject.rawRepresentation
        let bad: [(Data, RelayErrorCode, UInt32)] = [
            (Data([0x03, 0]), .malformed, 0),
            (Data([0x07]) + id, .unknownType, 9),
            (Data([0x03]) + id + raw + Data([2, 0, 1, 1]), .malformed, 9),
            (Data([0x03]) + id + raw + Data([0, 2, 1, 1]), .malformed, 9),
            (Data([0x02]) + id + raw.prefix(20), .malformed, 9),
            // SUBSCRIBE without room for its public key and signature.
            (Data([0x01]) + id + raw + Data(repeating: 0, count: 95), .malformed, 9),
        ]
        for (bytes, code, requestID) in bad {
            #expect(throws: RelayFrameError.self) { try RelayClientFrame(decoding: bytes) }
            do {
                _ = try RelayClientFrame(decoding: bytes)
            } catch {
                #expect(error.code == code)
                #expect(error.requestID == requestID)
            }
        }
        #expect(throws: PixieWireError.self) { try RelaySubject(rawRepresentation: Data(count: 31)) }
        #expect(throws: RelayFrameError.self) { try RelayServerFrame(decoding: Data([0x82, 0, 0, 0])) }
        #expect(throws: RelayFrameError.self) { try RelayServerFrame(decoding: Data([0x84]) + Data(count: 31)) }
    }

    @Test("SUBSCRIBE and CHALLENGE are laid out as docs/pixie-protocol.md says")
    func subscribeLayout() throws {
        let key = RelaySubjectKey()
        let challenge = Data(repeating: 0x11, count: 32)
        let frame = try key.subscribe(requestID: 5, challenge: challenge, pushToken: Data([0xEE]))
        guard case .subscribe(_, let subject, let publicKey, let signature, _) = frame else {
            Issue.record("not a SUBSCRIBE")
            return
        }
        #expect(
            frame.encoded()
                == Data([0x01, 0, 0, 0, 5]) + subject.rawRepresentation + publicKey + signature + Data([0, 1, 0xEE]))
        #expect(RelayServerFrame.challenge(nonce: challenge).encoded() == Data([0x84]) + challenge)
    }
}

@Suite("Self-certifying relay subjects")
struct RelaySubjectKeyTests {
    @Test("the subject is SHA-256 of the label and the public key, and only its key's signature proves it")
    func subjectsAreTheirKeysHash() throws {
        let key = RelaySubjectKey()
        var hasher = SHA256()
        hasher.update(data: Data("pixie/relay/subject/v1\u{0}".utf8))
        hasher.update(data: key.publicKey.rawRepresentation)
        #expect(key.subject.rawRepresentation == Data(hasher.finalize()))

        let challenge = SecureRandom.bytes(count: 32)
        let push = Data("apns-token".utf8)
        guard
            case .subscribe(_, let subject, let publicKey, let signature, let pushToken) = try key.subscribe(
                requestID: 1, challenge: challenge, pushToken: push)
        else { return }
        #expect(
            subject.isProven(publicKey: publicKey, signature: signature, challenge: challenge, pushToken: pushToken))
        // Another connection's challenge, another push token, another key, a subject the key does not own: no.
        #expect(
            !subject.isProven(publicKey: publicKey, signature: signature, challenge: Data(count: 32), pushToken: push))
        #expect(!subject.isProven(publicKey: publicKey, signature: signature, challenge: challenge, pushToken: Data()))
        let stranger = RelaySubjectKey()
        guard
            case .subscribe(_, _, let strangerKey, let strangerSignature, _) = try stranger.subscribe(
                requestID: 1, challenge: challenge, pushToken: push)
        else { return }
        #expect(
            !subject.isProven(
                publicKey: strangerKey, signature: strangerSignature, challenge: challenge, pushToken: push))
        #expect(
            !subject.isProven(publicKey: publicKey, signature: Data(count: 64), challenge: challenge, pushToken: push))
    }

    @Test("every sibling derives the same discovery subscribe key from the discovery seed, and no other seed does")
    func discoveryKeyIsDerived() throws {
        let seed = SecureRandom.bytes(count: 32)
        let one = try RelaySubjectKey(discoverySeed: seed)
        let two = try RelaySubjectKey(discoverySeed: seed)
        #expect(one.subject == two.subject)
        #expect(try RelaySubjectKey(discoverySeed: SecureRandom.bytes(count: 32)).subject != one.subject)
        #expect(throws: PixieWireError.self) { try RelaySubjectKey(discoverySeed: Data(count: 31)) }
    }
}
