import Foundation
import HTTPServer
import PixieServer
import PixieWire
import SiblingsCrypto
import Synchronization
import Testing
import WebSockets

@Suite("Relay: subscribe, send, deliver over a real HTTPServer")
struct RelayTests {
    @Test("a SEND with a fresh token reaches every connection holding the subject, and only those")
    func sendAndDeliver() async throws {
        let relay = try RelayHarness()
        let alice = try await relay.connect()
        let bob = try await relay.connect()
        let carol = try await relay.connect()
        let inbox = randomSubject()
        #expect(try await alice.subscribe(inbox) == .ok(requestID: 1))
        #expect(try await bob.subscribe(inbox) == .ok(requestID: 1))
        #expect(try await carol.subscribe(randomSubject()) == .ok(requestID: 1))

        let payload = Data("opaque ciphertext".utf8)
        #expect(try await carol.send(payload, to: inbox, token: relay.token()) == .ok(requestID: 2))
        #expect(try await alice.next() == .deliver(subject: inbox, wake: .silent, payload: payload))
        #expect(try await bob.next() == .deliver(subject: inbox, wake: .silent, payload: payload))

        // PING answers OK; UNSUBSCRIBE stops delivery to that connection.
        #expect(try await alice.request { .ping(requestID: $0) } == .ok(requestID: 2))
        #expect(try await bob.request { .unsubscribe(requestID: $0, subject: inbox) } == .ok(requestID: 2))
        #expect(try await carol.send(Data([1]), to: inbox, token: relay.token()) == .ok(requestID: 3))
        #expect(try await alice.next() == .deliver(subject: inbox, wake: .silent, payload: Data([1])))
        #expect(try await bob.request { .ping(requestID: $0) } == .ok(requestID: 3))
        #expect(relay.metrics.counter("pixie_relay_frames_forwarded_total") == 2)
        #expect(relay.metrics.counter("pixie_relay_connections") == 3)
        for client in [alice, bob, carol] { await client.close() }
        try await relay.waitForNoConnections()
        await relay.server.shutdown()
    }

    @Test("pure ephemeral: a frame sent before anyone holds its subject is never delivered later")
    func noMailbox() async throws {
        let relay = try RelayHarness()
        let sender = try await relay.connect()
        let inbox = randomSubject()
        #expect(try await sender.send(Data("too early".utf8), to: inbox, token: relay.token()) == .ok(requestID: 1))
        let late = try await relay.connect()
        try await late.subscribe(inbox)
        #expect(try await sender.send(Data("on time".utf8), to: inbox, token: relay.token()) == .ok(requestID: 2))
        // The first frame the late subscriber sees is the one sent after it subscribed.
        #expect(try await late.next() == .deliver(subject: inbox, wake: .silent, payload: Data("on time".utf8)))
        #expect(try await late.request { .ping(requestID: $0) } == .ok(requestID: 2))
        await sender.close()
        await late.close()
        await relay.server.shutdown()
    }

    @Test("two relay nodes behind one bus: a SEND on one reaches the subscriber on the other")
    func twoNodesShareTheBus() async throws {
        let bus = InProcessRelayBus()
        let tokens = InMemoryTokenSpender()
        let east = try RelayHarness(bus: bus, tokens: tokens)
        let west = try RelayHarness(bus: bus, tokens: tokens)
        let listener = try await east.connect()
        let sender = try await west.connect()
        let inbox = randomSubject()
        try await listener.subscribe(inbox)
        let token = west.token()
        #expect(try await sender.send(Data("across".utf8), to: inbox, token: token) == .ok(requestID: 1))
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("across".utf8)))
        // The spent set is shared too: the token is refused on the other node.
        let eastSender = try await east.connect()
        let again = try await eastSender.send(Data("twice".utf8), to: inbox, token: token)
        guard case .error(1, .tokenSpent, _) = again else {
            Issue.record("a token spent on one node was answered \(again) on the other")
            return
        }
        for client in [listener, sender, eastSender] { await client.close() }
        await east.server.shutdown()
        await west.server.shutdown()
    }

    @Test("a SEND's OK waits for the bus's flush, and a later PING's OK waits behind it: answers never overtake")
    func answersWaitForTheFlushInOrder() async throws {
        let bus = HeldFlushBus()
        let relay = try RelayHarness(bus: bus)
        let client = try await relay.connect()
        let inbox = randomSubject()
        try await client.socket.send(
            binary: RelayClientFrame.send(
                requestID: 1, subject: inbox, wake: .silent, token: relay.token(), payload: Data("held".utf8)
            ).encoded())
        try await eventually("the SEND's burst did not ask for a flush") { bus.waiting == 1 }
        // A burst of its own with no SEND: nothing to flush, yet its OK must not go out before the SEND's.
        try await client.socket.send(binary: RelayClientFrame.ping(requestID: 2).encoded())
        let received = Mutex<[RelayServerFrame]>([])
        let reader = Task {
            for _ in 0..<2 {
                let frame = try await client.next()
                received.withLock { $0.append(frame) }
            }
        }
        try await eventually("neither the PING was answered nor did it wait for a flush") {
            bus.waiting == 2 || !received.withLock { $0.isEmpty }
        }
        #expect(received.withLock { $0 }.isEmpty)
        #expect(bus.waiting == 2)
        bus.release()
        try await reader.value
        #expect(received.withLock { $0 } == [.ok(requestID: 1), .ok(requestID: 2)])
        await client.close()
        await relay.server.shutdown()
    }

    @Test("the bus cannot confirm a held flush: the SEND is answered ERROR unavailable, the PING after it OK")
    func aFailedFlushAnswersUnavailable() async throws {
        let bus = HeldFlushBus()
        let relay = try RelayHarness(bus: bus)
        let client = try await relay.connect()
        try await client.socket.send(
            binary: RelayClientFrame.send(
                requestID: 1, subject: randomSubject(), wake: .silent, token: relay.token(), payload: Data("x".utf8)
            ).encoded())
        try await client.socket.send(binary: RelayClientFrame.ping(requestID: 2).encoded())
        try await eventually("the SEND's burst did not ask for a flush") { bus.waiting >= 1 }
        // The PING waits behind the SEND if it came meanwhile (in its burst or its own), else it is answered after.
        bus.release(RelayBusError("NATS is away"))
        guard case .error(1, .unavailable, let reason) = try await client.next() else {
            Issue.record("a SEND whose flush failed was not answered ERROR unavailable")
            return
        }
        // The client hears what happened and to try again; the bus's own words are for the operator's log.
        #expect(reason.contains("try again") && !reason.contains("NATS is away"), "\(reason)")
        #expect(try await client.next() == .ok(requestID: 2))
        await client.close()
        await relay.server.shutdown()
    }

    @Test("no anonymous traffic: an unknown token, a token spent twice, are dropped with an ERROR")
    func tokensGateEverySend() async throws {
        let relay = try RelayHarness()
        let listener = try await relay.connect()
        let sender = try await relay.connect()
        let inbox = randomSubject()
        try await listener.subscribe(inbox)

        let bogus = try await sender.send(Data("x".utf8), to: inbox, token: Data(repeating: 7, count: 32))
        guard case .error(1, .tokenInvalid, _) = bogus else {
            Issue.record("an unknown token was answered \(bogus)")
            return
        }
        let token = relay.token()
        #expect(try await sender.send(Data("first".utf8), to: inbox, token: token) == .ok(requestID: 2))
        let again = try await sender.send(Data("second".utf8), to: inbox, token: token)
        guard case .error(3, .tokenSpent, _) = again else {
            Issue.record("a token spent twice was answered \(again)")
            return
        }
        // Only the frame with a good token arrived.
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("first".utf8)))
        #expect(try await listener.request { .ping(requestID: $0) } == .ok(requestID: 2))
        #expect(relay.metrics.counter("pixie_relay_frames_dropped_total", labels: ["reason": "token_invalid"]) == 1)
        #expect(relay.metrics.counter("pixie_relay_frames_dropped_total", labels: ["reason": "token_spent"]) == 1)
        #expect(relay.metrics.counter("pixie_relay_frames_forwarded_total") == 1)
        await listener.close()
        await sender.close()
        await relay.server.shutdown()
    }

    /// Frames written together reach the relay as one burst, whose tokens are spent with one call: every
    /// frame still gets its own answer, in order, and nothing after a malformed frame is handled or spent.
    @Test("a burst of frames: answers in order, a token repeated in the burst spent once, nothing after a bad frame")
    func bursts() async throws {
        let relay = try RelayHarness()
        let listener = try await relay.connect()
        let sender = try await relay.connect()
        let inbox = randomSubject()
        try await listener.subscribe(inbox)
        let (first, second) = (relay.token(), relay.token())
        let send = { (id: UInt32, token: Data, text: String) in
            RelayClientFrame.send(requestID: id, subject: inbox, wake: .silent, token: token, payload: Data(text.utf8))
                .encoded()
        }
        try await sender.socket.send(binaries: [
            send(10, first, "a"), send(11, first, "again"), send(12, Data([9]), "bogus"),
            RelayClientFrame.ping(requestID: 13).encoded(), send(14, second, "b"),
        ])
        #expect(try await sender.next() == .ok(requestID: 10))
        guard case .error(11, .tokenSpent, _) = try await sender.next() else {
            Issue.record("a token repeated within a burst was not refused as spent")
            return
        }
        guard case .error(12, .tokenInvalid, _) = try await sender.next() else {
            Issue.record("a bad token within a burst was not refused")
            return
        }
        #expect(try await sender.next() == .ok(requestID: 13))
        #expect(try await sender.next() == .ok(requestID: 14))
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("a".utf8)))
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("b".utf8)))

        // A malformed frame closes the connection: the SEND after it in the same burst is not handled, and its
        // token stays unspent (another connection spends it).
        let third = relay.token()
        try await sender.socket.send(binaries: [
            send(20, relay.token(), "c"), Data([0x04, 0, 0]), send(21, third, "never"),
        ])
        #expect(try await sender.next() == .ok(requestID: 20))
        guard case .error(0, .malformed, _) = try await sender.next() else {
            Issue.record("a malformed frame in a burst was not answered with ERROR")
            return
        }
        #expect(try await sender.socket.receive() == nil)
        #expect(sender.socket.closeCode == .protocolError)
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("c".utf8)))
        let other = try await relay.connect()
        #expect(try await other.send(Data("later".utf8), to: inbox, token: third) == .ok(requestID: 1))
        #expect(try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("later".utf8)))
        #expect(relay.metrics.counter("pixie_relay_frames_forwarded_total") == 4)
        await listener.close()
        await other.close()
        await relay.server.shutdown()
    }

    /// A burst longer than a connection's queue is no slow consumer: the queue is written as it fills.
    @Test("bursts longer than the queue: 600 PINGs answered, 400 SENDs delivered, nobody cut off")
    func longBursts() async throws {
        let relay = try RelayHarness(maximumQueuedFrames: 256)
        let listener = try await relay.connect()
        let sender = try await relay.connect()
        let inbox = randomSubject()
        try await listener.subscribe(inbox)
        try await sender.socket.send(binaries: (1...600).map { RelayClientFrame.ping(requestID: UInt32($0)).encoded() })
        for id in 1...600 { #expect(try await sender.next() == .ok(requestID: UInt32(id))) }
        let tokens = (0..<400).map { _ in relay.token() }
        try await sender.socket.send(
            binaries: tokens.enumerated().map { index, token in
                RelayClientFrame.send(
                    requestID: UInt32(1000 + index), subject: inbox, wake: .silent, token: token,
                    payload: Data("\(index)".utf8)
                ).encoded()
            })
        for index in 0..<400 {
            #expect(try await sender.next() == .ok(requestID: UInt32(1000 + index)))
            #expect(
                try await listener.next() == .deliver(subject: inbox, wake: .silent, payload: Data("\(index)".utf8)))
        }
        #expect(relay.metrics.counter("pixie_relay_slow_consumers_total") == 0)
        await listener.close()
        await sender.close()
        await relay.server.shutdown()
    }

    /// After a malformed frame nothing more of the connection is handled, in that burst or a later one.
    @Test("after a malformed frame, frames sent later are neither forwarded nor spent")
    func nothingAfterAMalformedFrame() async throws {
        let relay = try RelayHarness()
        let listener = try await relay.connect()
        let sender = try await relay.connect()
        let inbox = randomSubject()
        try await listener.subscribe(inbox)
        let tokens = (0..<20).map { _ in relay.token() }
        let frames = tokens.enumerated().map { index, token in
            RelayClientFrame.send(
                requestID: UInt32(index + 1), subject: inbox, wake: .silent, token: token, payload: Data()
            ).encoded()
        }
        // The malformed frame and the first ten SENDs in one write: one burst.
        try await sender.socket.send(binaries: [Data([0x04, 0, 0])] + frames[..<10])
        // The other ten one write each, for later bursts, until this client hears the relay's 1002.
        for frame in frames[10...] {
            do {
                try await sender.socket.send(binary: frame)
            } catch is WebSocketError {
                break  // the relay's 1002 arrived, or its close watchdog already shut the socket
            }
        }
        guard case .error(0, .malformed, _) = try await sender.next() else {
            Issue.record("the malformed frame was not answered with ERROR")
            return
        }
        #expect(try await sender.socket.receive() == nil)
        // None of the 20 tokens was spent: another connection spends every one.
        let other = try await relay.connect()
        for token in tokens {
            guard case .ok = try await other.send(Data("x".utf8), to: randomSubject(), token: token) else {
                Issue.record("a token sent after the malformed frame had been spent")
                return
            }
        }
        // The listener got nothing from the closed connection (a PING answered proves it is still in order).
        #expect(try await listener.request { .ping(requestID: $0) } == .ok(requestID: 2))
        #expect(relay.metrics.counter("pixie_relay_frames_forwarded_total") == 20)
        await listener.close()
        await other.close()
        await relay.server.shutdown()
    }

    @Test("a stranger who knows a device inbox, a reply subject or the discovery inbox cannot subscribe it")
    func strangersCannotSubscribe() async throws {
        let relay = try RelayHarness()
        let sender = try await relay.connect()
        let stranger = try await relay.connect()
        // The discovery inbox's key is the one every sibling derives from the account's discovery seed.
        let subjects = [
            ("device inbox", RelaySubjectKey()), ("reply subject", RelaySubjectKey()),
            ("discovery inbox", try RelaySubjectKey(discoverySeed: XWing.PrivateKey().seedRepresentation)),
        ]
        let holderPush = Data("holder-apns-token".utf8)
        for (name, key) in subjects {
            let holder = try await relay.connect()
            #expect(try await holder.subscribe(key, pushToken: holderPush) == .ok(requestID: 1), "\(name)")
            await holder.close()
            try await relay.waitForConnections(2)

            // The stranger's own key claiming the subject; the holder's proof replayed from the holder's
            // connection; and a proof whose push token was swapped: each refused.
            let own = RelaySubjectKey()
            let claimed = try await stranger.request { id in
                guard
                    case .subscribe(_, _, let publicKey, let signature, let push) = try! own.subscribe(
                        requestID: id, challenge: stranger.challenge, pushToken: Data("stranger".utf8))
                else { fatalError() }
                return .subscribe(
                    requestID: id, subject: key.subject, publicKey: publicKey, signature: signature, pushToken: push)
            }
            let replayed = try await stranger.request { id in
                guard
                    case .subscribe(_, let subject, let publicKey, let signature, let push) = try! key.subscribe(
                        requestID: id, challenge: holder.challenge, pushToken: Data("stranger".utf8))
                else { fatalError() }
                return .subscribe(
                    requestID: id, subject: subject, publicKey: publicKey, signature: signature, pushToken: push)
            }
            let swapped = try await stranger.request { id in
                guard
                    case .subscribe(_, let subject, let publicKey, let signature, _) = try! key.subscribe(
                        requestID: id, challenge: stranger.challenge, pushToken: holderPush)
                else { fatalError() }
                return .subscribe(
                    requestID: id, subject: subject, publicKey: publicKey, signature: signature,
                    pushToken: Data("stranger".utf8))
            }
            for answer in [claimed, replayed, swapped] {
                guard case .error(_, .subjectNotProven, _) = answer else {
                    Issue.record("\(name): a stranger's SUBSCRIBE was answered \(answer)")
                    continue
                }
            }
            // The holder sleeps: a Sync frame wakes it with its own push token, not the stranger's.
            let before = relay.push.wakes.count
            try await sender.send(Data("sync".utf8), to: key.subject, wake: .sync, token: relay.token())
            try await eventually("\(name): no push") { relay.push.wakes.count == before + 1 }
            #expect(relay.push.wakes.last?.subject == key.subject)
            #expect(relay.push.wakes.last?.pushToken == holderPush, "\(name): the push target was taken")
            // Nothing reached the stranger: its next frame answers its own PING.
            guard case .ok = try await stranger.request({ .ping(requestID: $0) }) else {
                Issue.record("\(name): the stranger got something before its PING's OK")
                continue
            }
        }
        #expect(
            relay.metrics.counter("pixie_relay_frames_dropped_total", labels: ["reason": "subject_not_proven"]) == 9)
        await sender.close()
        await stranger.close()
        await relay.server.shutdown()
    }

    @Test("a sleeping device gets exactly one push per wake episode; Silent never pushes")
    func pushOncePerEpisode() async throws {
        let relay = try RelayHarness()
        let inbox = randomSubject()
        let pushToken = Data("apns-device-token".utf8)
        let sender = try await relay.connect()

        // The device registers its push target with SUBSCRIBE, then goes to sleep.
        let device = try await relay.connect()
        try await device.subscribe(inbox, pushToken: pushToken)
        // While it is connected, a Sync frame is delivered and pushes nothing.
        try await sender.send(Data("live".utf8), to: inbox, wake: .sync, token: relay.token())
        #expect(try await device.next() == .deliver(subject: inbox, wake: .sync, payload: Data("live".utf8)))
        await device.close()
        try await relay.waitForConnections(1)

        // Silent frames to a sleeping device never push.
        try await sender.send(Data("silent".utf8), to: inbox, wake: .silent, token: relay.token())
        // Two Sync frames: one push.
        try await sender.send(Data("sync 1".utf8), to: inbox, wake: .sync, token: relay.token())
        try await sender.send(Data("sync 2".utf8), to: inbox, wake: .sync, token: relay.token())
        try await eventually("no push was sent") { relay.push.wakes.count == 1 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(relay.push.wakes.count == 1)
        #expect(relay.push.wakes.first?.subject == inbox)
        #expect(relay.push.wakes.first?.pushToken == pushToken)
        #expect(relay.metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "deduplicated"]) == 1)

        // The device reconnects (subscribes again, no token needed) and sleeps again: the next Sync pushes.
        let again = try await relay.connect()
        try await again.subscribe(inbox)
        await again.close()
        try await relay.waitForConnections(1)
        try await sender.send(Data("silent".utf8), to: inbox, wake: .silent, token: relay.token())
        try await sender.send(Data("sync 3".utf8), to: inbox, wake: .sync, token: relay.token())
        try await eventually("the second episode did not push") { relay.push.wakes.count == 2 }
        try await sender.send(Data("sync 4".utf8), to: inbox, wake: .sync, token: relay.token())
        try await Task.sleep(for: .milliseconds(100))
        #expect(relay.push.wakes.count == 2)

        // A subject nobody registered is never pushed.
        try await sender.send(Data("x".utf8), to: randomSubject(), wake: .sync, token: relay.token())
        #expect(relay.metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "unregistered"]) == 1)
        // A push is counted once the gateway has answered, after it recorded the wake.
        try await eventually("the second push was not counted as sent") {
            relay.metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "sent"]) == 2
        }
        await sender.close()
        await relay.server.shutdown()
    }

    @Test("a subject several siblings registered for wakes each of them once per episode")
    func pushesEverySibling() async throws {
        let relay = try RelayHarness()
        try await pushesEverySiblingOnce([relay])
        await relay.server.shutdown()
    }

    @Test("a client vanishing mid-frame disturbs no one")
    func vanishingMidFrame() async throws {
        let relay = try RelayHarness()
        let alice = try await relay.connect()
        let bob = try await relay.connect()
        let inbox = randomSubject()
        try await alice.subscribe(inbox)

        for _ in 0..<3 {
            let raw = try #require(RawSocket(port: Int(relay.port)))
            raw.send(
                Data(
                    ("GET /v1/relay HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
            #expect(raw.readHead().hasPrefix("HTTP/1.1 101"))
            // A masked binary frame announcing 1000 bytes, then 10 of them, then gone.
            raw.send(Data([0x82, 0x80 | 126, 0x03, 0xE8, 1, 2, 3, 4]) + Data(repeating: 0x03, count: 10))
            try await bob.send(Data("during".utf8), to: inbox, token: relay.token())
            raw.close()
            #expect(try await alice.next() == .deliver(subject: inbox, wake: .silent, payload: Data("during".utf8)))
        }
        try await relay.waitForConnections(2)
        try await bob.send(Data("after".utf8), to: inbox, token: relay.token())
        #expect(try await alice.next() == .deliver(subject: inbox, wake: .silent, payload: Data("after".utf8)))
        await alice.close()
        await bob.close()
        await relay.server.shutdown()
    }

    @Test("when the token store fails, a SEND is refused with unavailable and nothing reaches the subject")
    func aSpenderFailureForwardsNothing() async throws {
        let relay = try RelayHarness(spender: UnavailableTokenSpender())
        let listener = try await relay.connect()
        let sender = try await relay.connect()
        let subject = randomSubject()
        #expect(try await listener.subscribe(subject) == .ok(requestID: 1))
        guard
            case .error(1, .unavailable, _) = try await sender.send(Data("x".utf8), to: subject, token: Data("t".utf8))
        else {
            Issue.record("a SEND whose token could not be checked was not refused as unavailable")
            return
        }
        // The listener's next frame answers its own PING: no DELIVER came before it.
        #expect(try await listener.request { .ping(requestID: $0) } == .ok(requestID: 2))
        #expect(relay.metrics.counter("pixie_relay_frames_forwarded_total") == 0)
        await listener.close()
        await sender.close()
        await relay.server.shutdown()
    }

    @Test("300 concurrent connections each subscribe and receive their frame")
    func hundredsOfConnections() async throws {
        let relay = try RelayHarness()
        let count = 300
        let subjects = (0..<count).map { _ in randomSubject() }
        let clients = try await withThrowingTaskGroup(of: (Int, RelayTestClient).self) { group in
            for index in 0..<count {
                group.addTask {
                    let client = try await relay.connect()
                    try await client.subscribe(subjects[index])
                    return (index, client)
                }
            }
            var clients = [RelayTestClient?](repeating: nil, count: count)
            for try await (index, client) in group { clients[index] = client }
            return clients.map { $0! }
        }
        #expect(relay.metrics.counter("pixie_relay_connections") == Double(count))
        let sender = try await relay.connect()
        for (index, subject) in subjects.enumerated() {
            let frame = RelayClientFrame.send(
                requestID: UInt32(index), subject: subject, wake: .silent, token: relay.token(),
                payload: Data("frame \(index)".utf8))
            try await sender.socket.send(binary: frame.encoded())
        }
        let received = try await withThrowingTaskGroup(of: Bool.self) { group in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    try await client.next()
                        == .deliver(subject: subjects[index], wake: .silent, payload: Data("frame \(index)".utf8))
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(received == count)
        for _ in 0..<count { _ = try await sender.next() }
        await withTaskGroup(of: Void.self) { group in
            for client in clients + [sender] { group.addTask { await client.close() } }
        }
        try await relay.waitForNoConnections()
        await relay.server.shutdown()
    }

    @Test("an idle relay connection outlives the listener's idle timeout for HTTP")
    func idleConnectionStays() async throws {
        let relay = try RelayHarness(connectionTimeout: 1)
        // The 1 s timeout also bounds each handshake, which a loaded machine can stretch past it: try again.
        func connect() async throws -> RelayTestClient {
            for _ in 1..<10 {
                if let client = try? await relay.connect() { return client }
            }
            return try await relay.connect()
        }
        let idle = try await connect()
        let sender = try await connect()
        let inbox = randomSubject()
        try await idle.subscribe(inbox)
        try await Task.sleep(for: .milliseconds(2500))
        try await sender.send(Data("later".utf8), to: inbox, token: relay.token())
        #expect(try await idle.next() == .deliver(subject: inbox, wake: .silent, payload: Data("later".utf8)))
        await idle.close()
        await sender.close()
        await relay.server.shutdown()
    }

    @Test("a slow consumer is closed with 1008 and nobody else waits for it")
    func slowConsumer() async throws {
        let relay = try RelayHarness(maximumQueuedFrames: 8)
        let slow = try await relay.connect()
        let fast = try await relay.connect()
        let sender = try await relay.connect()
        let busy = randomSubject()
        let other = randomSubject()
        try await slow.subscribe(busy)
        try await fast.subscribe(other)
        // The slow client never reads: its socket buffers fill, then its queue of 8 overflows.
        let payload = Data(repeating: 0xAB, count: 60_000)
        for round in 0..<400 {
            try await sender.send(payload, to: busy, token: relay.token())
            if relay.metrics.counter("pixie_relay_slow_consumers_total") == 1 {
                break
            }
            if round % 50 == 49 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try await eventually("the slow consumer was not detected") {
            relay.metrics.counter("pixie_relay_slow_consumers_total") == 1
        }
        // Everyone else carries on.
        try await sender.send(Data("still here".utf8), to: other, token: relay.token())
        #expect(try await fast.next() == .deliver(subject: other, wake: .silent, payload: Data("still here".utf8)))
        // The slow client still reads nothing, so its close frame cannot get through: the relay ends the
        // connection itself 5 s after the cut (its writer does not wait for the peer for good).
        try await eventually("the relay kept a slow consumer that reads nothing open") {
            relay.metrics.counter("pixie_relay_connections") == 2
        }
        await slow.close()
        await fast.close()
        await sender.close()
        try await relay.waitForNoConnections()
        await relay.server.shutdown()
    }
}

extension RelayHarness {
    func waitForConnections(_ count: Int) async throws {
        try await eventually("the relay does not have \(count) connections") {
            metrics.counter("pixie_relay_connections") == Double(count)
        }
    }
}

/// The in-process bus with its flushes held until the test lets them go (``release(_:)``), as a NATS round trip
/// that has not come back; after that, like a bus that answers at once, every flush gets the same outcome.
final class HeldFlushBus: RelayBus {
    private struct State {
        var held: [@Sendable (Result<Void, RelayBusError>) -> Void] = []
        var released: Result<Void, RelayBusError>?
    }

    private let inner = InProcessRelayBus()
    private let state = Mutex(State())

    /// Flushes asked for and not yet let go.
    var waiting: Int { state.withLock { $0.held.count } }

    /// Answers every flush asked for so far, and every later one: done, or failed with `error`.
    func release(_ error: RelayBusError? = nil) {
        let outcome: Result<Void, RelayBusError> = error.map { .failure($0) } ?? .success(())
        let waiting = state.withLock { state in
            defer { state.held = [] }
            state.released = outcome
            return state.held
        }
        for done in waiting { done(outcome) }
    }

    func publish(_ frame: Data, to subject: RelaySubject) -> Int { inner.publish(frame, to: subject) }
    func flush(then done: @escaping @Sendable (Result<Void, RelayBusError>) -> Void) {
        let released = state.withLock { state in
            if state.released == nil { state.held.append(done) }
            return state.released
        }
        if let released { done(released) }
    }
    func subscribe(_ subject: RelaySubject, deliver: @escaping @Sendable (Data) -> Void) -> RelayBusSubscription {
        inner.subscribe(subject, deliver: deliver)
    }
    func hasSubscribers(_ subject: RelaySubject) -> Bool { inner.hasSubscribers(subject) }
    var spansNodes: Bool { false }
}

/// Several devices registered for one subject (the account's discovery inbox, one per sibling) are each pushed once
/// per wake episode, whichever of `nodes` the devices and frames go through.
func pushesEverySiblingOnce(_ nodes: [RelayHarness]) async throws {
    let inbox = randomSubject()
    let tokens = [Data("phone-token".utf8), Data("tablet-token".utf8)]
    for (index, token) in tokens.enumerated() {
        let node = nodes[index % nodes.count]
        let device = try await node.connect()
        #expect(try await device.subscribe(inbox, pushToken: token) == .ok(requestID: 1))
        await device.close()
        try await node.waitForNoConnections()
    }
    func wakes() -> [Data] { nodes.flatMap { $0.push.wakes.map(\.pushToken) } }
    for index in 0..<3 {
        let node = nodes[index % nodes.count]
        let sender = try await node.connect()
        _ = try await sender.send(Data("sign-in \(index)".utf8), to: inbox, wake: .sync, token: node.token())
        await sender.close()
    }
    try await eventually("not every sibling was pushed") { wakes().count >= 2 }
    try await Task.sleep(for: .milliseconds(100))
    // Each sibling once, though three frames came.
    #expect(wakes().sorted { $0.lexicographicallyPrecedes($1) } == tokens.sorted { $0.lexicographicallyPrecedes($1) })
    // One of them wakes and holds the inbox again, then sleeps: the next frame starts a new episode for both.
    let back = try await nodes[0].connect()
    _ = try await back.subscribe(inbox)
    await back.close()
    try await nodes[0].waitForNoConnections()
    let sender = try await nodes[nodes.count - 1].connect()
    _ = try await sender.send(Data("again".utf8), to: inbox, wake: .sync, token: nodes[nodes.count - 1].token())
    await sender.close()
    try await eventually("the next episode did not push both") { wakes().count == 4 }
}
