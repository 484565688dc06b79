import Foundation
@_spi(Testing) import PixieDevice
import PixieDeviceTestSupport
import PixieServer
import PixieWire
import Synchronization
import Testing

/// Two devices of one account in one process: pixie-server's services through ``InProcessTransport``, the relay in
/// memory (``InMemoryRelay``), and, where the seed's timings are tested, a device clock the test moves
/// (``ManualDeviceClock``), so that 35 seconds of re-sends and a 30-second grace take milliseconds.
@Suite("Devices in memory: sign-in and absorbing over the in-memory relay", .serialized)
struct DevicesInMemoryTests {
    static let number = "+14155550146"
    static let server = URL(string: "http://pixie.invalid")!

    /// A phone with an account and a laptop signed in through the phone's approval, both over `relay`.
    struct Account {
        let fixture: Fixture
        let relay: InMemoryRelay
        let directory: URL
        let phone: DeviceHome
        let laptop: DeviceHome
        let environment: DeviceEnvironment
        let listener: Task<Void, any Error>
        /// The check code the phone's listener approves with (the device signing in shows it).
        let checkCode: Box<String?>
        let bundle: TrustBundle

        /// Signs another device in through the phone's approval, with an empty store.
        func addDevice(_ name: String) async throws -> DeviceHome {
            checkCode.set(nil)
            let home = try DeviceHome(directory: directory.appendingPathComponent(name))
            let sms = fixture.sms
            _ = try await OnboardingFlow(home: home, environment: environment).signIn(
                server: server, trustBundle: bundle, name: name, phoneNumber: number,
                code: { number, _ in
                    guard let code = sms.lastCode(to: number) else { throw FixtureError("no code to \(number)") }
                    return code
                },
                configuration: SignInApprovalRequester.Configuration(deviceModel: name),
                events: { event in
                    if case .waiting(let code) = event { checkCode.set(code) }
                })
            return home
        }

        func stop() async {
            listener.cancel()
            _ = await listener.result
            try? FileManager.default.removeItem(at: directory)
        }
    }

    final class Box<Value: Sendable>: Sendable {
        let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
        var get: Value { value.withLock { $0 } }
        func set(_ new: Value) { value.withLock { $0 = new } }
        func append<Element>(_ element: Element) where Value == [Element] { value.withLock { $0.append(element) } }
    }

    static func account() async throws -> (Account, Box<[InboxListener.Outcome]>) {
        let fixture = try Fixture(start: Date())
        // The token key lists go into the log, as the server's run() does before it listens.
        _ = try await fixture.application.reconcileTransparency()
        let relay = InMemoryRelay()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("in-memory-\(UUID())")
        let environment = DeviceEnvironment(
            transport: { _ in InProcessTransport(fixture.router) }, relay: relay.connector)
        let sms = fixture.sms
        let code: OnboardingFlow.CodeSource = { number, _ in
            guard let code = sms.lastCode(to: number) else { throw FixtureError("no code was sent to \(number)") }
            return code
        }
        let bundle = await fixture.application.trustBundle()
        let phone = try DeviceHome(directory: directory.appendingPathComponent("phone"))
        _ = try await OnboardingFlow(home: phone, environment: environment).createAccount(
            server: server, trustBundle: bundle, name: "phone", phoneNumber: number, code: code)

        // The phone listens, and approves with the check code the laptop shows.
        let checkCode = Box<String?>(nil)
        let reports = Box<[InboxListener.Outcome]>([])
        let listener = InboxListener(
            context: try DeviceContext(home: phone, environment: environment), deviceFamily: "Phone")
        let (ready, isReady) = AsyncStream.makeStream(of: Void.self)
        let listening = Task {
            try await listener.run(
                ready: { isReady.yield() },
                decide: { _ in
                    for _ in 0..<3000 {
                        if let code = checkCode.get { return .approve(checkCode: code) }
                        try? await Task.sleep(for: .milliseconds(10))
                    }
                    return .ignore
                },
                report: { reports.append($0) })
        }
        for await _ in ready { break }

        let laptop = try DeviceHome(directory: directory.appendingPathComponent("laptop"))
        do {
            _ = try await OnboardingFlow(home: laptop, environment: environment).signIn(
                server: server, trustBundle: bundle, name: "laptop", phoneNumber: number, code: code,
                configuration: SignInApprovalRequester.Configuration(deviceModel: "Laptop"),
                events: { event in
                    if case .waiting(let code) = event { checkCode.set(code) }
                })
        } catch {
            listening.cancel()
            _ = await listening.result
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        return (
            Account(
                fixture: fixture, relay: relay, directory: directory, phone: phone, laptop: laptop,
                environment: environment, listener: listening, checkCode: checkCode, bundle: bundle), reports
        )
    }

    @Test("the phone approves the laptop over the in-memory relay, and the laptop absorbs the phone's whole store")
    func signInAndAbsorb() async throws {
        try await Self.withAccount { account, reports in try await absorbs(account, reports) }
    }

    func absorbs(_ account: Account, _ reports: Box<[InboxListener.Outcome]>) async throws {
        let phoneStore = try DeviceStore(home: account.phone)
        try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
        try phoneStore.put(
            .providerAPIKeys, id: "openai", fields: ["provider": .text("openai"), "api_key": .text("k")])

        let sync = try await SyncService.connect(
            context: try DeviceContext(home: account.laptop, environment: account.environment))
        let outcome = try await sync.absorb()
        await sync.close()
        guard case .absorbed(let summary) = outcome else {
            Issue.record("expected the store, got \(outcome)")
            return
        }
        let laptopStore = try DeviceStore(home: account.laptop)
        #expect(summary.inserted == 2)
        #expect(try laptopStore.row(.providerAPIKeys, id: "openai")?["api_key"] == .text("k"))
        #expect(try laptopStore.row(.notebookNotes, id: "n1")?["body"] == .text("milk"))
        // The frames went through the in-memory relay: the request and the ack to the phone's inbox, what the
        // phone said (preparing, the offer) to the laptop's.
        let phoneInbox = try account.phone.state().inbox.subject
        let laptopInbox = try account.laptop.state().inbox.subject
        #expect(account.relay.accepted.filter { $0.subject == phoneInbox }.count >= 2)
        #expect(account.relay.accepted.filter { $0.subject == laptopInbox }.count >= 2)
        // The phone heard the ack.
        for _ in 0..<500 where !reports.get.contains(.sync(.acknowledged(ok: true, reason: ""))) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(reports.get.contains(.sync(.acknowledged(ok: true, reason: ""))))
    }

    @Test("the seed's timings on a clock the test moves: seven requests 5 s apart, the grace at 30 s, then noAnswer")
    func seedTimings() async throws {
        try await Self.withAccount { account, _ in try await timings(account) }
    }

    func timings(_ account: Account) async throws {
        // The phone is asleep: its listener stops, and nothing answers.
        account.listener.cancel()
        _ = await account.listener.result

        let clock = ManualDeviceClock(Date())
        var environment = account.environment
        environment.clock = clock
        let events = Box<[SyncService.Event]>([])
        let sync = try await SyncService.connect(
            context: try DeviceContext(home: account.laptop, environment: environment))
        let finished = Box(false)
        let absorbing = Task {
            defer { finished.set(true) }
            return try await sync.absorb { events.append($0) }
        }

        let laptopInbox = try account.laptop.state().inbox.subject
        let phoneInbox = try account.phone.state().inbox.subject
        func requestsSent() -> Int { account.relay.accepted.filter { $0.subject == phoneInbox }.count }
        // The clock moves a second at a time, each time once the loop has re-armed its timers (the re-send
        // timer, and the grace until it fires): a round's sends are out before its timer is.
        var sendTimes: [Int] = []
        var graceBefore30 = false
        for elapsed in 0...40 {
            let timers = elapsed < 30 ? 2 : 1
            for _ in 0..<5000 where !finished.get && clock.sleeperCount < timers {
                try await Task.sleep(for: .milliseconds(2))
            }
            while sendTimes.count < requestsSent() { sendTimes.append(elapsed) }
            if elapsed < 30, events.get.contains(.mayContinue) { graceBefore30 = true }
            if finished.get { break }
            clock.advance(by: 1)
        }
        let outcome = try await absorbing.value
        await sync.close()

        #expect(outcome == .noAnswer)
        #expect(sendTimes == [0, 5, 10, 15, 20, 25, 30])
        #expect(events.get.filter { if case .requesting = $0 { true } else { false } }.count == 7)
        #expect(events.get.contains(.mayContinue) && !graceBefore30)
        // Nothing was sent to the laptop: the phone never answered.
        #expect(account.relay.accepted.allSatisfy { $0.subject != laptopInbox })
    }

    /// Runs `body` on a fresh account, and stops it however `body` ends.
    static func withAccount(_ body: (Account, Box<[InboxListener.Outcome]>) async throws -> Void) async throws {
        let (account, reports) = try await account()
        do {
            try await body(account, reports)
        } catch {
            await account.stop()
            throw error
        }
        await account.stop()
    }

    /// Waits up to `seconds` (30: the suites share two cores with the rest of the test command) for `condition`.
    static func eventually(_ what: String, within seconds: Int = 30, _ condition: () throws -> Bool) async throws {
        for _ in 0..<(seconds * 100) {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("not within \(seconds) s: \(what)")
    }

    @Test("both listening, the reconcile loop keeps them in step: the empty laptop fills in, then writes either way")
    func staysInStep() async throws {
        try await Self.withAccount { account, phoneReports in
            let phoneStore = try DeviceStore(home: account.phone)
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            try phoneStore.put(.conversations, id: "c1", fields: ["title": .text("Family"), "created_at": .integer(1)])
            // The laptop continued without the snapshot: it starts empty, and its listener's loop fills it in.
            var listener = InboxListener(
                context: try DeviceContext(home: account.laptop, environment: account.environment),
                deviceFamily: "Laptop")
            listener.reconcileConfiguration.interval = .milliseconds(200)
            let laptopReports = Box<[InboxListener.Outcome]>([])
            let listening = Task {
                try await listener.run(decide: { _ in .ignore }, report: { laptopReports.append($0) })
            }
            defer { listening.cancel() }
            let laptopStore = try DeviceStore(home: account.laptop)
            try await Self.eventually("the laptop has the phone's note") {
                try laptopStore.row(.notebookNotes, id: "n1")?["body"] == .text("milk")
            }
            #expect(
                try laptopStore.row(.conversations, id: "c1")?.version
                    == phoneStore.row(.conversations, id: "c1")?.version)
            // Writes on both sides, a deletion among them, reach the other side.
            try laptopStore.put(.plans, id: "p1", fields: ["title": .text("Trip"), "body": .text("pack")])
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk, eggs")])
            try laptopStore.delete(.conversations, id: "c1")
            try await Self.eventually("both hold every change") {
                try phoneStore.row(.plans, id: "p1") != nil
                    && laptopStore.row(.notebookNotes, id: "n1")?["body"] == .text("milk, eggs")
                    && phoneStore.row(.conversations, id: "c1")?.isDeleted != false  // deleted, or collected already
            }
            try await Self.eventually("the digests agree") {
                try phoneStore.syncSummary()?.digests == laptopStore.syncSummary()?.digests
            }
            // Both recorded agreements with the other, and the rounds were reported.
            let laptopAuthor = try account.laptop.state().author
            #expect(try phoneStore.agreements().contains { $0.sibling == laptopAuthor })
            #expect(laptopReports.get.contains { if case .reconcile(.round) = $0 { true } else { false } })
            #expect(phoneReports.get.contains { if case .reconcile(.round) = $0 { true } else { false } })
            // With both devices agreed past the deletion, the tombstone was collected: it is gone, and stays gone.
            try await Self.eventually("the conversation's tombstone is collected on both") {
                try phoneStore.row(.conversations, id: "c1") == nil && laptopStore.row(.conversations, id: "c1") == nil
            }
            try await Task.sleep(for: .milliseconds(600))
            #expect(
                try phoneStore.row(.conversations, id: "c1") == nil && laptopStore.row(.conversations, id: "c1") == nil)
            listening.cancel()
            _ = await listening.result
        }
    }

    @Test("the relay drops the first two requests: the third, 10 s later on the laptop's clock, gets the store")
    func droppedRequests() async throws {
        try await Self.withAccount { account, _ in
            try DeviceStore(home: account.phone).put(
                .notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            let phoneInbox = try account.phone.state().inbox.subject
            account.relay.inject(.drop, count: 2) { $0.subject == phoneInbox }
            let clock = ManualDeviceClock(Date())
            var environment = account.environment
            environment.clock = clock
            let sync = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: environment))
            let finished = Box(false)
            let absorbing = Task {
                defer { finished.set(true) }
                return try await sync.absorb()
            }
            // Two rounds go nowhere; the clock moves on to the third.
            for _ in 0..<2 {
                for _ in 0..<5000 where !finished.get && clock.sleeperCount < 2 {
                    try await Task.sleep(for: .milliseconds(2))
                }
                clock.advance(by: 5)
            }
            let outcome = try await absorbing.value
            await sync.close()
            guard case .absorbed(let summary) = outcome else {
                Issue.record("expected the store, got \(outcome)")
                return
            }
            #expect(summary.inserted == 1)
            #expect(try DeviceStore(home: account.laptop).row(.notebookNotes, id: "n1")?["body"] == .text("milk"))
            // Three requests (the only frames of wake class Sync) were paid for; the phone saw only the third.
            #expect(account.relay.accepted.filter { $0.subject == phoneInbox && $0.wake == .sync }.count == 3)
        }
    }

    @Test("the phone's frames reach the laptop newest first (the offer before the preparing): absorbed all the same")
    func reorderedAnswers() async throws {
        try await Self.withAccount { account, _ in
            try DeviceStore(home: account.phone).put(
                .notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            let laptopInbox = try account.laptop.state().inbox.subject
            func toLaptop() -> Int { account.relay.accepted.filter { $0.subject == laptopInbox }.count }
            // The phone's listener pushes that write to its siblings within a second: that frame must not be one
            // of the two held below, which are the answers to the laptop's request.
            try await Self.eventually("the phone pushed its write to the laptop") { toLaptop() >= 1 }
            let pushed = toLaptop()
            account.relay.inject(.hold, count: 2) { $0.subject == laptopInbox }
            let sync = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: account.environment))
            let seen = Box<[SyncService.Event]>([])
            let absorbing = Task { try await sync.absorb { seen.append($0) } }
            // The SyncPreparing and the offer are both held, then let go in reverse.
            for _ in 0..<5000 where toLaptop() < pushed + 2 {
                try await Task.sleep(for: .milliseconds(2))
            }
            account.relay.releaseHeld()
            let outcome = try await absorbing.value
            await sync.close()
            guard case .absorbed(let summary) = outcome else {
                Issue.record("expected the store, got \(outcome)")
                return
            }
            #expect(summary.inserted == 1)
            // The offer came first, so the download began without a preparing phase.
            #expect(!seen.get.contains { if case .preparing = $0 { true } else { false } })
        }
    }
}
