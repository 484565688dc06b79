import Foundation
import PixieDevice
import PixieDeviceTestSupport
import PixieWire
import Testing

/// The test support's in-memory relay keeps the server relay's rules that devices rely on, and misbehaves only on
/// command: what the multi-device tests stand on.
@Suite("The in-memory relay: subjects proven, tokens spent once, frames bounded, faults on command")
struct InMemoryRelayTests {
    static func next(_ connection: any RelayConnection) async -> RelayDelivery? {
        var iterator = connection.deliveries.makeAsyncIterator()
        return await iterator.next()
    }

    static func token() -> Data { Data(UUID().uuidString.utf8) }

    @Test("a frame reaches the connections subscribed to its subject, and no other")
    func routes() async throws {
        let relay = InMemoryRelay()
        let (a, b, sender) = (relay.connect(), relay.connect(), relay.connect())
        let (keyA, keyB) = (RelaySubjectKey(), RelaySubjectKey())
        try await a.subscribe(keyA)
        try await b.subscribe(keyB)
        try await sender.send(Data("to a".utf8), to: keyA.subject, wake: .silent, token: Self.token())
        try await sender.send(Data("to b".utf8), to: keyB.subject, wake: .sync, token: Self.token())
        #expect(await Self.next(a) == RelayDelivery(subject: keyA.subject, wake: .silent, payload: Data("to a".utf8)))
        #expect(await Self.next(b) == RelayDelivery(subject: keyB.subject, wake: .sync, payload: Data("to b".utf8)))
        #expect(relay.subscriberCount(keyA.subject) == 1)
    }

    @Test("a token is good once, an empty one never, and a payload over the limit is refused")
    func rules() async throws {
        let relay = InMemoryRelay(maximumPayloadBytes: 16)
        let connection = relay.connect()
        let subject = RelaySubjectKey().subject
        let token = Self.token()
        try await connection.send(Data("hi".utf8), to: subject, wake: .silent, token: token)
        await #expect(throws: RelayConnectionError.refused(.tokenSpent, "the token was refused (token_spent)")) {
            try await connection.send(Data("again".utf8), to: subject, wake: .silent, token: token)
        }
        await #expect(throws: RelayConnectionError.refused(.tokenInvalid, "the token was refused (token_invalid)")) {
            try await connection.send(Data("free".utf8), to: subject, wake: .silent, token: Data())
        }
        await #expect(throws: RelayConnectionError.self) {
            try await connection.send(Data(count: 17), to: subject, wake: .silent, token: Self.token())
        }
        #expect(relay.accepted.count == 1)
    }

    @Test("drops, holds released in reverse order, and an end for every connection")
    func faults() async throws {
        let relay = InMemoryRelay()
        let listener = relay.connect()
        let key = RelaySubjectKey()
        try await listener.subscribe(key, pushToken: Data("push".utf8))
        #expect(relay.pushToken(for: key.subject) == Data("push".utf8))
        let sender = relay.connect()
        relay.inject(.drop, count: 1)
        try await sender.send(Data([0]), to: key.subject, wake: .silent, token: Self.token())
        relay.inject(.hold, count: 2)
        try await sender.send(Data([1]), to: key.subject, wake: .silent, token: Self.token())
        try await sender.send(Data([2]), to: key.subject, wake: .silent, token: Self.token())
        relay.releaseHeld()
        try await sender.send(Data([3]), to: key.subject, wake: .silent, token: Self.token())
        var iterator = listener.deliveries.makeAsyncIterator()
        var got: [UInt8] = []
        for _ in 0..<3 { got.append(try #require(await iterator.next()).payload.first!) }
        #expect(got == [2, 1, 3])
        relay.endAll()
        #expect(await iterator.next() == nil)
        #expect(listener.ended == .unavailable("the in-memory relay ended the connection (1013)"))
        await #expect(throws: RelayConnectionError.self) {
            try await sender.send(Data([4]), to: key.subject, wake: .silent, token: Self.token())
        }
    }
}
