import Foundation
@_spi(Testing) import PixieDevice
import PixieDeviceTestSupport
import PixieServer
import PixieWire
import SiblingsCrypto
import Storage
import Testing

/// Revoking a device from the devices' side (docs/pixie-protocol.md, "Revoking a device"): four devices, one
/// removed by another; the rest take the new keys from their sealed bundles, and each attack the removed device
/// could make with what it kept is shown to work before the rotation and to fail after it.
extension DevicesInMemoryTests {
    /// The account's discovery key as the log holds it now (what a new device seals its request to).
    static func loggedDiscoveryKey(_ account: Account) async throws -> XWing.PublicKey {
        let context = try DeviceContext(home: account.phone, environment: account.environment)
        let phoneID = try account.phone.state().phoneID.data
        let logged = try #require(
            try await context.bindings.loggedValue(KeyTransparencyLabel.discovery(phoneID: phoneID)))
        let binding = try #require(KeyTransparencyCommitment.DiscoveryBinding(logged: logged))
        return try XWing.PublicKey(rawRepresentation: binding.discoveryKey)
    }

    @Test("four devices, one removed: the others take the new keys, and what the removed one kept opens nothing new")
    func removingOneOfFour() async throws {
        try await Self.withAccount { account, _ in
            let tablet = try await account.addDevice("tablet")
            let watch = try await account.addDevice("watch")
            let kept = try #require(try watch.state().membership)
            let tabletState = try tablet.state()
            let phoneID = try account.phone.state().phoneID.data
            let cert = try account.phone.state().phoneCert.data
            let oldChannel = try InnerMAC.siblingChannelKey(accountSeed: kept.accountSeed.data)

            // Before: a new device's request, sealed to the logged discovery key, opens under what the watch holds,
            // and a frame the watch MACs passes a sibling's check. Only the rotation will change that.
            let before = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data("hello".utf8))
                .sealed(to: try await Self.loggedDiscoveryKey(account)).box
            #expect(throws: Never.self) {
                _ = try DiscoveryBox.open(
                    before, with: try XWing.PrivateKey(seedRepresentation: kept.discoverySeed.data))
            }
            let frame = try SealedSenderEnvelope.seal(
                .syncRequest, Data("from the watch".utf8), senderCert: Data(repeating: 1, count: 64),
                channelKey: oldChannel, to: try tabletState.sealing.publicKey, recipient: try tabletState.inbox.subject)
            let opened = try SealedSenderEnvelope.open(
                frame, with: try tabletState.sealing, recipient: try tabletState.inbox.subject)
            #expect(try opened.authenticate(channelKey: oldChannel) == Data("from the watch".utf8))

            // The phone removes the watch.
            let phone = try DeviceContext(home: account.phone, environment: account.environment)
            let removal = try await phone.removeDevice(named: "watch")
            #expect(removal.epoch == 2)
            #expect(removal.bundles == 3)
            let rotated = try #require(try account.phone.state().membership)
            #expect(rotated.epoch == 2)
            #expect(rotated.accountSeed != kept.accountSeed && rotated.discoverySeed != kept.discoverySeed)
            let listed = try await OnboardingFlow(home: account.phone, environment: account.environment).devices()
            #expect(listed.map(\.name).sorted() == ["laptop", "phone", "tablet"])

            // The laptop and the tablet were not listening: each takes its bundle when it next looks, once.
            for home in [account.laptop, tablet] {
                let context = try DeviceContext(home: home, environment: account.environment)
                #expect(try await context.followRotations() == .adopted(epoch: 2, steps: 1))
                let taken = try #require(try home.state().membership)
                #expect(taken.accountSeed == rotated.accountSeed && taken.discoverySeed == rotated.discoverySeed)
                #expect(try await context.followRotations() == .current(epoch: 2))
            }

            // After: a new request opens under the new discovery seed and not the watch's; the watch's frame fails
            // the check under the new channel key.
            let after = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data("hello".utf8))
                .sealed(to: try await Self.loggedDiscoveryKey(account)).box
            #expect(throws: PixieWireError.self) {
                _ = try DiscoveryBox.open(
                    after, with: try XWing.PrivateKey(seedRepresentation: kept.discoverySeed.data))
            }
            _ = try DiscoveryBox.open(after, with: try XWing.PrivateKey(seedRepresentation: rotated.discoverySeed.data))
            let newChannel = try InnerMAC.siblingChannelKey(
                accountSeed: try #require(try tablet.state().membership).accountSeed.data)
            #expect(throws: PixieWireError.self) { _ = try opened.authenticate(channelKey: newChannel) }
            _ = phoneID

            // The watch is told, plainly, on its next request; removing the others is refused to it.
            let watchContext = try DeviceContext(home: watch, environment: account.environment)
            for attempt in 0..<2 {
                do {
                    if attempt == 0 {
                        _ = try await watchContext.followRotations()
                    } else {
                        _ = try await watchContext.removeDevice(named: "phone")
                    }
                    Issue.record("the removed device was not refused")
                } catch PixieClientError.refused(let status, let error) {
                    #expect(status == 401)
                    #expect(error.error == "device_removed")
                    #expect(error.removedBy == "phone")
                }
            }
            #expect(
                try await OnboardingFlow(home: account.phone, environment: account.environment).devices().count == 3)
        }
    }

    @Test("a server that withholds one device's bundle is caught by that device, which says so and changes nothing")
    func aWithheldBundleIsReported() async throws {
        try await Self.withAccount { account, _ in
            let watch = try await account.addDevice("watch")
            let phone = try DeviceContext(home: account.phone, environment: account.environment)
            _ = try await phone.removeDevice(named: "watch")
            _ = watch
            // The server drops the laptop's bundle: the log still shows the rotation.
            let laptopID = try #require(try account.laptop.state().membership).deviceID
            _ = try account.fixture.database.execute(
                "DELETE FROM rotation_bundles WHERE device_id = ?", [.text(laptopID)])
            let before = try #require(try account.laptop.state().membership)
            let laptop = try DeviceContext(home: account.laptop, environment: account.environment)
            let refused = await #expect(throws: RotationError.self) { try await laptop.followRotations() }
            #expect(refused == .withheld(2))
            #expect("\(refused.map { "\($0)" } ?? "")".contains("holds no rotation bundle for this device for epoch 2"))
            let after = try #require(try account.laptop.state().membership)
            #expect(after.accountSeed == before.accountSeed && after.epoch == before.epoch)
        }
    }

    @Test("a listening sibling takes the new keys within its check, and the loop carries on under them")
    func aListeningSiblingTakesTheNewKeys() async throws {
        try await Self.withAccount { account, _ in
            let watch = try await account.addDevice("watch")
            let watchKept = try #require(try watch.state().membership)
            let laptopReports = Box<[InboxListener.Outcome]>([])
            let laptop = try Self.listen(
                account.laptop, account, interval: .milliseconds(300), rotationCheck: .milliseconds(200),
                reports: laptopReports)
            defer { laptop.cancel() }
            // The phone's own listener approved the others; the removal runs beside it, as `pixie devices remove`
            // does in another process, and the phone listens again afterwards.
            account.listener.cancel()
            _ = await account.listener.result
            _ = try await DeviceContext(home: account.phone, environment: account.environment)
                .removeDevice(named: "watch")
            try await Self.eventually("the listening laptop took the new keys") {
                laptopReports.get.contains(.rotated(epoch: 2))
            }
            let laptopSeeds = try #require(try account.laptop.state().membership)
            #expect(laptopSeeds.epoch == 2 && laptopSeeds.accountSeed != watchKept.accountSeed)
            #expect(laptopSeeds.accountSeed == (try account.phone.state().membership?.accountSeed))
            // The loop goes on under the new channel key: a note written on the phone reaches the laptop.
            let phone = try Self.listen(account.phone, account, interval: .milliseconds(300))
            defer { phone.cancel() }
            try DeviceStore(home: account.phone).put(
                .notebookNotes, id: "after", fields: ["title": .text("After"), "body": .text("the rotation")])
            let laptopStore = try DeviceStore(home: account.laptop)
            try await Self.eventually("the note written after the rotation reached the laptop") {
                try laptopStore.row(.notebookNotes, id: "after") != nil
            }
            #expect(!laptopReports.get.contains { if case .rotationRefused = $0 { true } else { false } })
            phone.cancel()
            laptop.cancel()
            _ = await phone.result
            _ = await laptop.result
        }
    }

    @Test("a frame under keys a listening sibling lacks makes it check at once, not at its next hourly look")
    func aFailedFrameNudgesTheCheck() async throws {
        try await Self.withAccount { account, _ in
            _ = try await account.addDevice("watch")
            let laptopReports = Box<[InboxListener.Outcome]>([])
            let laptop = try Self.listen(
                account.laptop, account, interval: .seconds(3600), rotationCheck: .seconds(3600),
                reports: laptopReports)
            defer { laptop.cancel() }
            account.listener.cancel()
            _ = await account.listener.result
            _ = try await DeviceContext(home: account.phone, environment: account.environment)
                .removeDevice(named: "watch")
            // The phone listens again under the new keys; its first round's message fails the laptop's check.
            let phone = try Self.listen(account.phone, account, interval: .milliseconds(300))
            defer { phone.cancel() }
            try await Self.eventually("the laptop checked when the phone's frame failed, and took the new keys") {
                laptopReports.get.contains(.rotated(epoch: 2))
            }
            try DeviceStore(home: account.phone).put(
                .notebookNotes, id: "n", fields: ["title": .text("Nudged"), "body": .text("in step")])
            let laptopStore = try DeviceStore(home: account.laptop)
            try await Self.eventually("the note reached the laptop under the new keys") {
                try laptopStore.row(.notebookNotes, id: "n") != nil
            }
            phone.cancel()
            laptop.cancel()
            _ = await phone.result
            _ = await laptop.result
        }
    }
    @Test(
        "the relay's device_removed ending makes a listener check at once: a sibling takes the new keys, the removed one stops"
    )
    func theRelaysEndingIsActedOn() async throws {
        try await Self.withAccount { account, _ in
            let watch = try await account.addDevice("watch")
            let oldDiscovery = try RelaySubjectKey(
                discoverySeed: try #require(try account.laptop.state().membership).discoverySeed.data
            ).subject
            let watchInbox = try watch.state().inbox.subject
            // Both listen with checks an hour apart, and nothing else will make them look: the phone stops.
            let laptopReports = Box<[InboxListener.Outcome]>([])
            let laptop = try Self.listen(
                account.laptop, account, interval: .seconds(3600), rotationCheck: .seconds(3600),
                reports: laptopReports)
            defer { laptop.cancel() }
            let watchListening = try Self.listen(
                watch, account, interval: .seconds(3600), rotationCheck: .seconds(3600))
            defer { watchListening.cancel() }
            account.listener.cancel()
            _ = await account.listener.result
            try await Self.eventually("the laptop and the watch listen") {
                account.relay.subscriberCount(oldDiscovery) == 2 && account.relay.subscriberCount(watchInbox) == 1
            }
            _ = try await DeviceContext(home: account.phone, environment: account.environment)
                .removeDevice(named: "watch")
            // What identity-svc has every relay node do: end the old discovery inbox's and the watch's subscriptions.
            account.relay.endSubscriptions(
                of: oldDiscovery, reason: "the account's discovery inbox was rotated when a device was removed")
            account.relay.endSubscriptions(of: watchInbox)
            try await Self.eventually("the laptop asked the log at once and took the new keys") {
                laptopReports.get.contains(.rotated(epoch: 2))
            }
            switch await watchListening.result {
            case .failure(PixieClientError.refused(let status, let error)):
                #expect(status == 401 && error.error == "device_removed" && error.removedBy == "phone")
            case let other: Issue.record("the removed watch's listener ended with \(other)")
            }
            laptop.cancel()
            _ = await laptop.result
        }
    }
    @Test("an approval given after a rotation the listener has not taken yet is refused: no old seeds go out")
    func aStaleApprovalIsRefused() async throws {
        try await Self.withAccount { account, _ in
            _ = try await account.addDevice("watch")
            account.listener.cancel()
            _ = await account.listener.result
            // The laptop listens with its check an hour away; its person answers only when the test lets them.
            let (asked, release) = (Box(false), Box(false))
            let reports = Box<[InboxListener.Outcome]>([])
            var listener = InboxListener(
                context: try DeviceContext(home: account.laptop, environment: account.environment),
                deviceFamily: "Laptop")
            listener.rotationCheckInterval = .seconds(3600)
            let (ready, isReady) = AsyncStream.makeStream(of: Void.self)
            let listening = Task { [listener] in
                try await listener.run(
                    ready: { isReady.yield() },
                    decide: { _ in
                        asked.set(true)
                        for _ in 0..<3000 {
                            if release.get, let code = account.checkCode.get { return .approve(checkCode: code) }
                            try? await Task.sleep(for: .milliseconds(10))
                        }
                        return .ignore
                    },
                    report: { reports.append($0) })
            }
            defer { listening.cancel() }
            for await _ in ready { break }
            // A tablet asks (on the discovery inbox it looked up: the old one); while the laptop's person reads the
            // prompt, the phone removes the watch.
            let joining = Task { try await account.addDevice("tablet") }
            defer { joining.cancel() }
            try await Self.eventually("the laptop's person was asked") { asked.get }
            _ = try await DeviceContext(home: account.phone, environment: account.environment)
                .removeDevice(named: "watch")
            release.set(true)
            try await Self.eventually("the approval was refused, with the reason") {
                reports.get.contains {
                    if case .failed(_, let reason) = $0 { return reason.contains("rotated a moment ago") }
                    return false
                }
            }
            #expect(!reports.get.contains { if case .approved = $0 { true } else { false } })
            joining.cancel()
            _ = await joining.result
            listening.cancel()
            _ = await listening.result
        }
    }
}
