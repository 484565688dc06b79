import Foundation
@_spi(Testing) import PixieDevice
import PixieDeviceTestSupport
import PixieServer
import PixieWire
import SiblingsCrypto
import Testing

/// The reconcile loop between devices that listen over the in-memory relay (docs/pixie-sync.md): writes pushed,
/// relays that duplicate and replay, a stranger's rounds, and a deletion that waits for a device that is away.
extension DevicesInMemoryTests {

    /// Runs `home`'s listener with `interval` between its rounds and `pushDelay` between looks for a local write.
    static func listen(
        _ home: DeviceHome, _ account: Account, interval: Duration = .milliseconds(200),
        pushDelay: Duration = .milliseconds(50), rotationCheck: Duration = .seconds(60),
        reports: Box<[InboxListener.Outcome]> = Box([])
    ) throws -> Task<Void, any Error> {
        var listener = InboxListener(
            context: try DeviceContext(home: home, environment: account.environment), deviceFamily: "Laptop")
        listener.reconcileConfiguration.interval = interval
        listener.reconcileConfiguration.pushDelay = pushDelay
        listener.rotationCheckInterval = rotationCheck
        return Task { try await listener.run(decide: { _ in .ignore }, report: { reports.append($0) }) }
    }

    static func everything(_ store: DeviceStore) throws -> [StoreRow] {
        try StoreCategory.allCases.flatMap { try store.rows($0, includingDeleted: true) }.sorted { $0.id < $1.id }
    }

    @Test(
        "a write is pushed to a listening sibling though rounds are an hour apart; duplicates and replays change nothing"
    )
    func pushedAndReplayed() async throws {
        try await Self.withAccount { account, phoneReports in
            let phoneStore = try DeviceStore(home: account.phone)
            let laptopStore = try DeviceStore(home: account.laptop)
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            let inboxes = [try account.phone.state().inbox.subject, try account.laptop.state().inbox.subject]
            // Every frame to either device's inbox is delivered twice.
            account.relay.inject(.duplicate) { inboxes.contains($0.subject) }
            let laptopReports = Box<[InboxListener.Outcome]>([])
            let listening = try Self.listen(account.laptop, account, interval: .seconds(3600), reports: laptopReports)
            defer { listening.cancel() }
            try await Self.eventually("the laptop has the phone's note, from the round at its start") {
                try laptopStore.row(.notebookNotes, id: "n1") != nil
            }
            // A write on the laptop, through a store of its own (as `pixie store` in another process), is pushed.
            try laptopStore.put(.plans, id: "p1", fields: ["title": .text("Trip"), "body": .text("pack")])
            try await Self.eventually("the phone has the laptop's plan") { try phoneStore.row(.plans, id: "p1") != nil }
            // A deletion on the phone: its listener (rounds 10 minutes apart) pushes it within its second.
            try phoneStore.delete(.notebookNotes, id: "n1")
            try await Self.eventually("the deletion reached the laptop, and both collected its tombstone") {
                try laptopStore.row(.notebookNotes, id: "n1") == nil && phoneStore.row(.notebookNotes, id: "n1") == nil
            }
            try await Self.eventually("the digests agree") {
                try phoneStore.syncSummary()?.digests == laptopStore.syncSummary()?.digests
            }
            // Each duplicate reached a loop and was refused as a message it had handled.
            let refused = laptopReports.get.filter {
                switch $0 {
                case .reconcile(.dropped), .reconcile(.passed): true
                default: false
                }
            }
            #expect(!refused.isEmpty)
            // Now the relay replays every frame it carried to either inbox: old digests, old rows (the note alive).
            let before = (try Self.everything(phoneStore), try Self.everything(laptopStore))
            account.relay.clearFaults()
            let carried = account.relay.accepted.filter { inboxes.contains($0.subject) }
            #expect(carried.count >= 6)
            account.relay.replay(carried)
            try await Task.sleep(for: .milliseconds(800))
            #expect(try Self.everything(phoneStore) == before.0)
            #expect(try Self.everything(laptopStore) == before.1)
            #expect(
                try phoneStore.row(.notebookNotes, id: "n1") == nil && laptopStore.row(.notebookNotes, id: "n1") == nil)
            #expect(!phoneReports.get.contains { if case .reconcile(.failed) = $0 { true } else { false } })
            listening.cancel()
            _ = await listening.result
        }
    }

    @Test("a message written on the phone while the laptop absorbs is not in the snapshot, and arrives after it")
    func writtenDuringAbsorption() async throws {
        try await Self.withAccount { account, _ in
            let phoneStore = try DeviceStore(home: account.phone)
            let laptopStore = try DeviceStore(home: account.laptop)
            try phoneStore.put(.conversations, id: "c1", fields: ["title": .text("Family"), "created_at": .integer(1)])
            func message(_ body: String) -> [String: StoreValue] {
                ["conversation_id": .text("c1"), "sender": .text("me"), "body": .text(body), "sent_at": .integer(1)]
            }
            try phoneStore.put(.messages, id: "m1", fields: message("before"))
            // The phone's frames to the laptop (its preparing and its offer) are held until the message is written:
            // the snapshot is made and parked by then.
            let laptopInbox = try account.laptop.state().inbox.subject
            account.relay.inject(.hold, count: 2) { $0.subject == laptopInbox }
            let sync = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: account.environment))
            let absorbing = Task { try await sync.absorb() }
            for _ in 0..<5000 where account.relay.accepted.filter({ $0.subject == laptopInbox }).count < 2 {
                try await Task.sleep(for: .milliseconds(2))
            }
            try phoneStore.put(.messages, id: "m2", fields: message("during"))
            account.relay.releaseHeld()
            let outcome = try await absorbing.value
            await sync.close()
            guard case .absorbed = outcome else {
                Issue.record("expected the store, got \(outcome)")
                return
            }
            #expect(try laptopStore.row(.messages, id: "m1")?["body"] == .text("before"))
            #expect(try laptopStore.row(.messages, id: "m2") == nil)
            // The round that follows an absorption brings it, and only it: the snapshot carried the versions.
            let reconciling = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: account.environment))
            let rounds = try await reconciling.reconcile()
            await reconciling.close()
            #expect(rounds.ended.count == 1 && rounds.unanswered.isEmpty)
            #expect(rounds.ended.first?.rowsApplied == 1 && rounds.ended.first?.rowsSent == 0)
            #expect(try laptopStore.row(.messages, id: "m2")?["body"] == .text("during"))
            #expect(try phoneStore.syncSummary()?.digests == laptopStore.syncSummary()?.digests)
        }
    }

    /// A device clock off the true time by `by` seconds.
    struct ShiftedClock: DeviceClock {
        let by: TimeInterval
        var now: Date { Date().addingTimeInterval(by) }
        func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
    }

    /// The in-process server, with the `Date` a real pixie-server's answers carry (libmicrohttpd adds it).
    struct DatedTransport: HTTPTransport {
        let inner: any HTTPTransport
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            var response = try await inner.send(request)
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            response.headers["date"] = formatter.string(from: Date())
            return response
        }
    }

    @Test("a laptop whose clock is 3 hours behind cannot take part, until the server's Date corrects its clock")
    func clockCorrectedByTheServer() async throws {
        try await Self.withAccount { account, _ in
            let phoneStore = try DeviceStore(home: account.phone)
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            var behind = account.environment
            behind.clock = ShiftedClock(by: -10_800)
            // Uncorrected (the server gives no Date), the laptop's own SenderCert is 3 hours in its future: no round
            // can start, and it says why.
            let uncorrected = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: behind))
            let heldEvents = Box<[SyncLoop.Event]>([])
            let held = try await uncorrected.reconcile { heldEvents.append($0) }
            await uncorrected.close()
            #expect(held.ended.isEmpty, "\(held)")
            #expect(
                heldEvents.get.contains {
                    if case .failed(let reason) = $0 { reason.contains("clock") } else { false }
                }, "\(heldEvents.get)")
            let laptopStore = try DeviceStore(home: account.laptop, clock: ShiftedClock(by: -10_800))
            #expect(try laptopStore.row(.notebookNotes, id: "n1") == nil)
            // With the server's Date, the loop corrects the clock, says so, and takes the row.
            let fixture = account.fixture
            behind.transport = { _ in DatedTransport(inner: InProcessTransport(fixture.router)) }
            let events = Box<[SyncLoop.Event]>([])
            let corrected = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: behind))
            let rounds = try await corrected.reconcile { events.append($0) }
            await corrected.close()
            #expect(rounds.ended.first?.rowsApplied == 1 && rounds.ended.first?.rowsHeld == 0, "\(rounds)")
            let offset = events.get.compactMap { if case .clockCorrected(let offset) = $0 { offset } else { nil } }
            #expect(offset.count == 1 && abs((offset.first ?? 0) - 10_800) < 3, "\(events.get)")
            #expect(try laptopStore.row(.notebookNotes, id: "n1")?["body"] == .text("milk"))
            // The offset is kept: a store opened afresh on the laptop (as `pixie store` is) dates its writes by it.
            let written = try DeviceStore(home: account.laptop, clock: ShiftedClock(by: -10_800)).put(
                .plans, id: "p1", fields: ["title": .text("Trip"), "body": .text("pack")])
            let dated = Date(timeIntervalSince1970: TimeInterval(written.version.hlc >> 16) / 1000)
            #expect(abs(dated.timeIntervalSinceNow) < 5, "\(written.version)")
        }
    }

    @Test("a round that ends with a category still different is followed by one more round, and only one")
    func unsettledFollowedUpOnce() async throws {
        try await Self.withAccount { account, _ in
            // A note dated an hour ahead of the laptop's clock: the laptop holds it back, so its notes never agree.
            let ahead = try DeviceStore(home: account.phone, clock: ShiftedClock(by: 3600))
            try ahead.put(.notebookNotes, id: "n1", fields: ["title": .text("Later"), "body": .text("milk")])
            let service = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: account.environment))
            let rounds = try await service.reconcile()
            await service.close()
            // The first round ended unsettled, so one more was opened at once; it ended unsettled too, and was
            // left to the interval.
            #expect(rounds.ended.count == 2, "\(rounds)")
            #expect(
                rounds.ended.allSatisfy {
                    $0.started && $0.rowsHeld == 1 && !$0.agreedCategories.contains(.notebookNotes)
                })
            #expect(try DeviceStore(home: account.laptop).row(.notebookNotes, id: "n1") == nil)
        }
    }

    @Test("notes too large for a frame go through blob-svc both ways, and their blobs are deleted once applied")
    func largeRows() async throws {
        try await Self.withAccount { account, _ in
            let phoneStore = try DeviceStore(home: account.phone)
            let laptopStore = try DeviceStore(home: account.laptop)
            let long = String(repeating: "a line of a long note\n", count: 9000)  // about 200 KB
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("Long"), "body": .text(long)])
            try phoneStore.put(.notebookNotes, id: "n2", fields: ["title": .text("Short"), "body": .text("milk")])
            let context = try DeviceContext(home: account.laptop, environment: account.environment)
            let service = try await SyncService.connect(context: context)
            let events = Box<[SyncLoop.Event]>([])
            let first = try await service.reconcile { events.append($0) }
            await service.close()
            // The laptop was empty: it asked for every row, and the phone's answer named a blob for the long one.
            #expect(
                first.ended.first?.rowsApplied == 2 && first.ended.first?.rowsTooLarge == 0, "\(first) \(events.get)")
            #expect(try laptopStore.row(.notebookNotes, id: "n1")?["body"] == .text(long))
            // The other way: a long note written on the laptop goes to the phone with the laptop's own round.
            try laptopStore.put(
                .notebookNotes, id: "n3", fields: ["title": .text("Longer"), "body": .text(long + long)])
            let again = try await SyncService.connect(context: context)
            let second = try await again.reconcile()
            await again.close()
            #expect(second.ended.first?.rowsSent == 1, "\(second)")
            #expect(try phoneStore.row(.notebookNotes, id: "n3")?["body"] == .text(long + long))
            try await Self.eventually("the digests agree") {
                try phoneStore.syncSummary()?.digests == laptopStore.syncSummary()?.digests
            }
            // Each blob was deleted by the device that applied it.
            try await Self.eventually("no blob is left") { account.fixture.blobCount() == 0 }
        }
    }

    @Test("a stranger's reconcile messages, sealed under its own account's SenderCert, are dropped; nothing changes")
    func strangerRounds() async throws {
        try await Self.withAccount { account, phoneReports in
            let phoneStore = try DeviceStore(home: account.phone)
            try phoneStore.put(.notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("milk")])
            let stranger = try DeviceHome(directory: account.directory.appendingPathComponent("stranger"))
            let sms = account.fixture.sms
            _ = try await OnboardingFlow(home: stranger, environment: account.environment).createAccount(
                server: Self.server, trustBundle: account.bundle, name: "stranger", phoneNumber: "+14155550199",
                code: { number, _ in
                    guard let code = sms.lastCode(to: number) else { throw FixtureError("no code to \(number)") }
                    return code
                })
            // The stranger's note has the phone's note's id and a newer version: applied, it would win.
            let strangerStore = try DeviceStore(home: stranger)
            let forged = try strangerStore.put(
                .notebookNotes, id: "n1", fields: ["title": .text("List"), "body": .text("forged")])
            #expect(forged.outranks(try #require(try phoneStore.row(.notebookNotes, id: "n1"))))
            let phone = try account.phone.state()
            let phoneKey = try XWing.PrivateKey(seedRepresentation: phone.sealingSeed.data).publicKey
            let phoneInbox = try phone.inbox.subject
            let strangerInbox = try stranger.state().inbox.subject
            let half = Data(repeating: 7, count: SyncRoundID.halfByteCount)
            let (_, opening) = try ReconcileRound.open(
                half: half, inbox: strangerInbox, sibling: phone.author, data: strangerStore, now: Date())
            var records = Data()
            StoreSnapshot.append(forged, to: &records)
            let rows = SiblingMessage.syncRows(
                SyncRows(
                    header: SyncRoundHeader(
                        round: try SyncRoundID(initiator: half, responder: Data(repeating: 8, count: 16)),
                        sender: strangerInbox),
                    batch: 0, isLast: true, records: records))
            let before = try Self.everything(phoneStore)
            let dropsBefore = phoneReports.get.filter { if case .sync(.dropped) = $0 { true } else { false } }.count
            let service = try await SyncService.connect(
                context: try DeviceContext(home: stranger, environment: account.environment))
            try await service.send(opening, to: phoneInbox, key: phoneKey)
            try await service.send(rows, to: phoneInbox, key: phoneKey)
            await service.close()
            try await Self.eventually("the phone dropped both") {
                phoneReports.get.filter { if case .sync(.dropped) = $0 { true } else { false } }.count
                    == dropsBefore + 2
            }
            #expect(try Self.everything(phoneStore) == before)
            #expect(try phoneStore.row(.notebookNotes, id: "n1")?["body"] == .text("milk"))
            // The phone answered nothing: no frame went to the stranger.
            #expect(account.relay.accepted.allSatisfy { $0.subject != strangerInbox })
        }
    }

    @Test("three devices: a deletion's tombstone waits for the one that is away, which deletes too; nothing returns")
    func deletionWaitsForTheDeviceAway() async throws {
        try await Self.withAccount { account, _ in
            let tablet = try await account.addDevice("tablet")
            let homes = [account.phone, account.laptop, tablet]
            let stores = try homes.map { try DeviceStore(home: $0) }
            try stores[0].put(.conversations, id: "c1", fields: ["title": .text("Family"), "created_at": .integer(1)])
            let laptopListening = try Self.listen(account.laptop, account)
            defer { laptopListening.cancel() }
            var tabletListening = try Self.listen(tablet, account)
            try await Self.eventually("all three hold the conversation") {
                try stores.allSatisfy { try $0.row(.conversations, id: "c1")?.isDeleted == false }
            }
            // The tablet goes away; the laptop deletes the conversation.
            tabletListening.cancel()
            _ = await tabletListening.result
            try stores[1].delete(.conversations, id: "c1")
            let laptopAuthor = try account.laptop.state().author
            try await Self.eventually("the phone has the tombstone and has agreed on it with the laptop") {
                let held = try stores[0].tombstones(.conversations)
                let agreed = try stores[0].agreements().first {
                    $0.sibling == laptopAuthor && $0.category == .conversations
                }
                return held.count == 1 && (agreed?.seq ?? 0) >= held.newestSeq
            }
            // Rounds go on (the laptop's every 200 ms); the barrier holds the tombstone for the tablet.
            try await Task.sleep(for: .milliseconds(600))
            #expect(try stores[0].row(.conversations, id: "c1")?.isDeleted == true)
            #expect(try stores[1].row(.conversations, id: "c1")?.isDeleted == true)
            #expect(try stores[2].row(.conversations, id: "c1")?.isDeleted == false)
            // The tablet comes back with its live row: the deletion reaches it, and then every device collects.
            tabletListening = try Self.listen(tablet, account)
            defer { tabletListening.cancel() }
            try await Self.eventually("the tombstone is collected on all three") {
                try stores.allSatisfy { try $0.row(.conversations, id: "c1") == nil }
            }
            try await Task.sleep(for: .milliseconds(600))
            #expect(try stores.allSatisfy { try $0.row(.conversations, id: "c1") == nil })
            // A snapshot made now does not bring it back either: the laptop absorbs the phone's whole store again.
            let sync = try await SyncService.connect(
                context: try DeviceContext(home: account.laptop, environment: account.environment))
            let outcome = try await sync.absorb()
            await sync.close()
            guard case .absorbed = outcome else {
                Issue.record("expected the store, got \(outcome)")
                return
            }
            #expect(try stores[1].row(.conversations, id: "c1") == nil)
            tabletListening.cancel()
            laptopListening.cancel()
            _ = await tabletListening.result
            _ = await laptopListening.result
        }
    }
}
