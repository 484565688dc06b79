import Foundation
import PixieWire

/// The relay's frames (docs/pixie-protocol.md, "Relay frames"), both directions: a device parses the server's,
/// the relay parses every client's. An accepted frame must decode again, once encoded, to the same frame.
let relayFrameTarget = FuzzTarget(
    name: "relay-frame",
    summary: "relay client and server frames (PixieWire RelayClientFrame, RelayServerFrame)",
    maximumLength: 4096,
    seeds: {
        let key = RelaySubjectKey()
        let subject = key.subject
        let challenge = Data(repeating: 9, count: RelayServerFrame.challengeByteCount)
        let client: [RelayClientFrame] = [
            try key.subscribe(requestID: 1, challenge: challenge, pushToken: Data("push".utf8)),
            .unsubscribe(requestID: 2, subject: subject),
            .send(
                requestID: 3, subject: subject, wake: .sync, token: Data(repeating: 1, count: 162),
                payload: Data("hi".utf8)),
            .ping(requestID: 4),
        ]
        let server: [RelayServerFrame] = [
            .challenge(nonce: challenge), .deliver(subject: subject, wake: .silent, payload: Data("hello".utf8)),
            .ok(requestID: 1), .error(requestID: 2, code: .tokenInvalid, reason: "the token is spent"),
        ]
        return client.map { $0.encoded() } + server.map { $0.encoded() }
    },
    run: { input in
        if let frame = try? RelayClientFrame(decoding: input) {
            guard (try? RelayClientFrame(decoding: frame.encoded())) == frame else {
                finding("a client frame does not survive encoding: \(frame)")
            }
        }
        if let frame = try? RelayServerFrame(decoding: input) {
            guard (try? RelayServerFrame(decoding: frame.encoded())) == frame else {
                finding("a server frame does not survive encoding: \(frame)")
            }
        }
        _ = try? RelaySubject(rawRepresentation: input)
    })
