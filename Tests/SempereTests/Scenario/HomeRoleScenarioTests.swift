import Age
import Foundation
import Sempere
import Testing

/// The guide's home role (issue "Sempere, part 2": Make Home, takeover with the kit, kit replacement)
/// walked by devices that each run a ``VaultSession`` on their own configuration directory and their own
/// copy of the vault folder, synced by a ``SimulatedProvider`` that holds files back, reorders, duplicates
/// and makes conflict copies when two devices change vault.json at once. Each race the format doc settles
/// is played here, with the attacks, under three seeds.
@Suite("Sempere scenario: the home role over an unreliable provider")
struct HomeRoleScenarioTests {
    /// A device: its configuration directory and its copy of the folder. What its sessions said on
    /// opening is kept in `seen`, as a person would have read it.
    final class Member {
        let name: String
        let config: URL
        let folder: URL
        var seen: [String] = []

        init(_ name: String, root: URL, provider: SimulatedProvider) throws {
            self.name = name
            config = root.appendingPathComponent("\(name)-config")
            folder = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            provider.attach(name, folder: folder)
        }

        func session(now: Date = Date()) throws -> VaultSession {
            let session = try VaultSession(configRoot: config, folder: folder.path, now: now)
            seen += session.notices
            return session
        }

        var keys: DeviceKeys { get throws { try VaultSession.deviceKeys(configRoot: config) } }

        /// The list in this device's copy of the folder, unchecked (what the provider delivered).
        func delivered() throws -> VaultBody { try VaultFolder(url: folder).unverifiedVault().body }

        func saw(_ text: String) -> Bool { seen.contains { $0.contains(text) } }
    }

    /// A vault made on the laptop (home) with the phone and the tablet (and `more`) joined through the
    /// provider, each of which wrote a note; the kit on paper.
    struct World {
        let root: URL
        let provider: SimulatedProvider
        let members: [Member]
        let kit: RecoveryKit
        var notes: [String: String] = [:]

        init(seed: UInt64, more: [String] = []) throws {
            let root = try temporaryDirectory()
            let provider = SimulatedProvider(seed: seed)
            provider.holdBack = 0.3
            provider.duplicate = 0.2
            self.root = root
            self.provider = provider
            members = try (["laptop", "phone", "tablet"] + more).map { try Member($0, root: root, provider: provider) }
            let home = members[0]
            let created = try VaultSession.create(
                folder: home.folder, homeName: "Laptop", postQuantum: false, passphrase: nil, configRoot: home.config)
            try created.session.kitShown()  // on paper now: the laptop keeps no copy
            kit = created.kit
            for member in members.dropFirst() { try join(member) }
            for member in members {
                let markdown = "# From the \(member.name)\n"
                notes[try member.session().newNote(markdown: markdown)] = markdown
            }
            try settle(members) { try members.allSatisfy { try $0.session().list().notes.count == notes.count } }
        }

        subscript(name: String) -> Member { members.first { $0.name == name }! }
        var names: [String] { members.map(\.name) }

        func remove() { try? FileManager.default.removeItem(at: root) }

        /// Joins `member` through the provider, six words each way, home being whichever device is home.
        func join(_ member: Member) throws {
            try settle(members) { (try? member.delivered()) != nil }
            let request = try VaultSession.askToJoin(
                folder: member.folder, name: member.name, configRoot: member.config)
            let home = members.first { (try? $0.session().isHome) == true }!
            try settle(members) {
                try VaultFolder(url: home.folder).requests().contains { $0.body.requestID == request.body.requestID }
            }
            var session = try home.session()
            let approved = try session.approve(.words(request.words.description))
            let id = try member.keys.id
            try settle(members) { try member.delivered().device(id) != nil }
            _ = try VaultSession.finishJoin(
                folder: member.folder, check: .words(approved.words.description), configRoot: member.config)
        }

        /// Syncs `online` until `condition` holds (the provider holds files back at random), or fails.
        func settle(
            _ online: [Member], sourceLocation: SourceLocation = #_sourceLocation, until condition: () throws -> Bool
        ) throws {
            var last = "false"
            for _ in 0..<40 {
                try provider.settle(online.map(\.name), rounds: 1)
                do {
                    if try condition() { return }
                } catch {
                    last = "\(error)"
                }
            }
            Issue.record(
                "the provider never delivered: the condition did not hold after 40 rounds (last: \(last))",
                sourceLocation: sourceLocation)
        }

        /// `member` opens the vault and lists every note written so far, with its text.
        /// Once the provider has delivered what it holds back (the records a removed device's notes are
        /// checked against, say), `member` lists every note.
        func expectEveryNote(on member: Member, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try settle(members) {
                let shown = Set(try member.session().list().notes.map(\.path))
                return notes.keys.allSatisfy(shown.contains)
            }
            let listing = try member.session().list()
            let listed = Dictionary(uniqueKeysWithValues: listing.notes.map { ($0.path, $0.markdown) })
            for (path, markdown) in notes {
                #expect(
                    listed[path] == markdown,
                    Comment(
                        rawValue: "\(member.name) lacks \(path): pending "
                            + "\(listing.pending.map { "\($0.path) \($0.reason)" }), set aside "
                            + "\(listing.setAside.map { "\($0.path) \($0.reason)" })"),
                    sourceLocation: sourceLocation)
            }
        }
    }

    @Test(
        "Make Home under faults: every device follows the handoff, the old home manages nothing",
        arguments: [1, 7, 42] as [UInt64])
    func makeHome(seed: UInt64) throws {
        var world = try World(seed: seed)
        defer { world.remove() }
        let (laptop, phone, tablet) = (world["laptop"], world["phone"], world["tablet"])
        var home = try laptop.session()
        // Attack: a handoff naming a device that is not listed is refused, and nothing changes.
        let outsider = DeviceKeys.generate(postQuantum: false)
        let unlisted = VaultBody.Device(
            id: outsider.id, name: "Outsider", signingKey: outsider.publicKey.rawRepresentation,
            wrapRecipient: outsider.identity.recipientString, addedIn: 1)
        expectSempereError(.notFound) { try home.makeHome(unlisted) }
        #expect(try laptop.session().isHome)

        try home.makeHome(try home.device(matching: "Phone"))
        let phoneID = try phone.keys.id
        try world.settle(world.members) {
            try world.members.allSatisfy { try $0.session().body.home == phoneID }
        }
        #expect(phone.saw("this device is home now"))
        #expect(tablet.saw("phone (\(phoneID.prefix(8))) is home now"))
        // The epoch that ended keeps the record of the files that existed (the three notes).
        let body = try tablet.session().body
        #expect(body.epochs.count == 2 && body.records.last?.notesCount == 3)

        // The old home manages nothing; the new one does, and every device follows it.
        var oldHome = try laptop.session()
        expectSempereError(.notHome) { try oldHome.rename(device: try oldHome.device(matching: "Tablet"), to: "Mine") }
        var newHome = try phone.session()
        try newHome.rename(device: try newHome.device(matching: "Tablet"), to: "Kitchen tablet")
        try world.settle(world.members) {
            try world.members.allSatisfy { try $0.session().name(of: try tablet.keys.id) == "Kitchen tablet" }
        }
        // The old home still writes and reads: its new note is under the new epoch's key.
        let late = "# Written after the handoff\n"
        world.notes[try laptop.session().newNote(markdown: late)] = late
        try world.settle(world.members) {
            try world.members.allSatisfy { try $0.session().list().notes.count == world.notes.count }
        }
        for member in world.members { try world.expectEveryNote(on: member) }
    }

    @Test(
        "a stolen home races the takeover with a handoff to its own device, then keeps signing: nobody follows it",
        arguments: [1, 7, 42] as [UInt64])
    func stolenHomeRacesTheTakeover(seed: UInt64) throws {
        var world = try World(seed: seed, more: ["spare"])
        defer { world.remove() }
        let (laptop, phone, tablet, spare) = (world["laptop"], world["phone"], world["tablet"], world["spare"])
        // "spare" joined the vault as the thief's own device would: approved by the stolen laptop. The
        // phone (the owner's) goes offline, and the thief, holding the laptop, renames devices well ahead
        // and hands the home role to the spare.
        let thiefSide = [laptop, tablet, spare]
        var stolen = try laptop.session()
        let phoneID = try phone.keys.id
        for index in 0..<4 { try stolen.rename(device: try stolen.device(matching: phoneID), to: "Phone \(index)") }
        try stolen.makeHome(try stolen.device(matching: "spare"))
        let thiefList = try VaultFolder(url: laptop.folder).unverifiedVault()
        let spareID = try spare.keys.id
        #expect(thiefList.body.home == spareID)
        try world.settle(thiefSide) { try tablet.session().body.home == spareID }

        // The owner, on the phone that saw none of it, takes over with the paper kit, keeping the tablet.
        var owner = try phone.session()
        #expect(owner.body.generation < (try tablet.session().body.generation))
        try owner.takeOver(kit: world.kit, keep: ["tablet"])
        world.notes[try owner.newNote(markdown: "# After the takeover\n")] = "# After the takeover\n"

        // Both sides changed vault.json: the provider keeps both, one as a conflict copy. The takeover wins
        // on every device, whatever the thief's generation.
        let owned = [phone, tablet]
        try world.settle(world.members) {
            try owned.allSatisfy { try $0.session().body.home == phoneID && $0.session().body.takeoverGeneration == 1 }
                && laptop.session().body.home == phoneID
        }
        #expect(tablet.saw("THE VAULT WAS TAKEN OVER") && tablet.saw("This device was kept"))
        expectSempereError(.removed) { try laptop.session().list() }
        // The spare, added in a change the takeover did not see, is not in the new list.
        #expect(try phone.session().body.device(spareID) == nil)

        // The thief keeps signing with the keys home handed to the spare (the session refuses it, so it
        // signs directly), far ahead in generation, and puts its list in the folder.
        let spareKeys = try spare.keys
        var forged = thiefList
        for _ in 0..<6 {
            forged = try VaultHome(credentials: spareKeys).rename(
                deviceID: try tablet.keys.id, to: "Owned", in: forged)
        }
        // Written once the spare has the newest vault.json, so that the provider takes it as a change to it
        // (not a conflict copy beside it): every device then meets it as vault.json.
        try world.settle(world.members) {
            try Data(contentsOf: spare.folder.appendingPathComponent(VaultFolder.vaultFile))
                == world.provider.cloud[VaultFolder.vaultFile]?.last?.bytes
        }
        try VaultFolder(url: spare.folder).write(forged)
        try world.provider.sync(spare.name)
        #expect(world.provider.cloud[VaultFolder.vaultFile]?.last?.bytes == (try forged.encoded()))
        // However it arrives, no device ever follows it, and the phone (home) puts its own list back.
        var followedTheThief = false
        try world.settle(world.members) {
            for member in owned {
                if let body = try? member.session().body, body.home != phoneID { followedTheThief = true }
            }
            return try owned.allSatisfy {
                try $0.session().body.home == phoneID && $0.delivered().home == phoneID
                    && $0.session().list().notes.count == world.notes.count
            }
        }
        #expect(!followedTheThief)
        // The phone, home, refused it and put its own list back, saying so.
        #expect(phone.saw("put back the device list it follows"))
        #expect(try tablet.session().name(of: try tablet.keys.id) == "tablet")
        // The spare, once the takeover reaches it, is in no list it accepts.
        try world.settle(world.members) { (try? spare.session().body.home) == phoneID }
        let outside = #expect(throws: SempereError.self) { try spare.session().list() }
        #expect([.removed, .notFound].contains(outside?.code))
        for member in owned { try world.expectEveryNote(on: member) }
    }

    @Test(
        "a stolen home replaces the kit: every device shows it, and the paper kit's takeover cancels it for good",
        arguments: [1, 7, 42] as [UInt64])
    func stolenHomeReplacesTheKit(seed: UInt64) throws {
        let world = try World(seed: seed)
        defer { world.remove() }
        let (laptop, phone, tablet) = (world["laptop"], world["phone"], world["tablet"])
        var stolen = try laptop.session()
        let thiefKit = try stolen.replaceKit(currentKit: nil)
        try stolen.kitShown()
        #expect(thiefKit.effectiveAt != nil)
        try world.settle(world.members) {
            for member in [phone, tablet] { _ = try? member.session() }
            return [phone, tablet].allSatisfy { $0.saw("THE RECOVERY KIT IS BEING REPLACED") }
        }

        // Within the delay, the owner takes over with the paper kit from the phone: the replacement is gone.
        var owner = try phone.session()
        try owner.takeOver(kit: world.kit, keep: ["tablet"])
        let phoneID = try phone.keys.id
        try world.settle(world.members) {
            let body = try tablet.session().body
            return body.home == phoneID && body.kitReplacement == nil
        }
        // Long after the delay, the paper kit is still the vault's, and the thief's kit takes nothing over:
        // not from a device of the vault, nor from a new one with nothing but that kit.
        let later = Date().addingTimeInterval(100 * 3600)
        let paperKey = try world.kit.signingKey().publicKey.rawRepresentation
        #expect(try phone.session(now: later).body.recovery.signingKey == paperKey)
        #expect(try tablet.session(now: later).body.recovery.signingKey == paperKey)
        var tabletSession = try tablet.session(now: later)
        #expect(throws: SempereError.self) { try tabletSession.takeOver(kit: thiefKit.kit, keep: []) }
        let intruder = try Member("intruder", root: world.root, provider: world.provider)
        try world.settle(world.members + [intruder]) { (try? intruder.delivered()) != nil }
        #expect(throws: SempereError.self) {
            try VaultSession.takeOver(
                folder: intruder.folder, kit: thiefKit.kit, name: "Intruder", keep: [], configRoot: intruder.config,
                now: later)
        }
        #expect(try tablet.session(now: later).body.home == phoneID)
        for member in [phone, tablet] { try world.expectEveryNote(on: member) }
    }

    @Test(
        "after a replacement the current kit co-signed, the old kit is dead: its takeover is refused, its wraps are gone",
        arguments: [1, 7, 42] as [UInt64])
    func replayedOldKit(seed: UInt64) throws {
        let world = try World(seed: seed)
        defer { world.remove() }
        let (phone, tablet) = (world["phone"], world["tablet"])
        // The laptop is lost; the owner takes over from the phone and replaces the kit at once.
        var owner = try phone.session()
        try owner.takeOver(kit: world.kit, keep: ["tablet"])
        let replaced = try owner.replaceKit(currentKit: world.kit)
        try owner.kitShown()
        #expect(replaced.effectiveAt == nil)
        let newKey = try replaced.kit.signingKey().publicKey.rawRepresentation
        try world.settle(world.members) { try tablet.session().body.recovery.signingKey == newKey }
        let note = "# After the new kit\n"
        let path = try owner.newNote(markdown: note)
        try world.settle(world.members) { try tablet.session().list().notes.contains { $0.path == path } }

        // Someone with a photo of the old kit: it opens no wrap of the epoch the new note is under...
        let oldWrap = try world.kit.wrapIdentity(postQuantum: false)
        let body = try tablet.session().body
        #expect(
            body.currentEpoch.wraps.values.allSatisfy {
                (try? Age.decrypt(Data($0.utf8), identities: [oldWrap.ageIdentity])) == nil
            })
        // ...and takes nothing over, from a device of the vault or from a new one.
        var tabletSession = try tablet.session()
        #expect(throws: SempereError.self) { try tabletSession.takeOver(kit: world.kit, keep: []) }
        let intruder = try Member("intruder", root: world.root, provider: world.provider)
        try world.settle(world.members + [intruder]) { (try? intruder.delivered()) != nil }
        #expect(throws: SempereError.self) {
            try VaultSession.takeOver(
                folder: intruder.folder, kit: world.kit, name: "Intruder", keep: [], configRoot: intruder.config)
        }
        #expect(try tablet.session().body.home == (try phone.keys.id))
    }

    @Test(
        "two holders of the kit take over at once: each is told someone has the kit, and taking over again settles it",
        arguments: [1, 7, 42] as [UInt64])
    func twoKitHolders(seed: UInt64) throws {
        let world = try World(seed: seed)
        defer { world.remove() }
        let (laptop, phone, tablet) = (world["laptop"], world["phone"], world["tablet"])
        // Neither has synced the other's: both take over, each keeping the other.
        var first = try phone.session()
        var second = try tablet.session()
        try first.takeOver(kit: world.kit, keep: ["tablet"])
        try second.takeOver(kit: world.kit, keep: ["phone"])
        let (phoneID, tabletID) = (try phone.keys.id, try tablet.keys.id)
        try world.settle(world.members) {
            for member in [phone, tablet] { _ = try? member.session() }
            return phone.saw("two takeovers with the recovery kit") && tablet.saw("two takeovers with the recovery kit")
        }
        // Each still follows its own, and says so on every command until it is settled.
        #expect(try phone.session().body.home == phoneID && tablet.session().body.home == tabletID)
        #expect(phone.saw("someone has your kit") && tablet.saw("someone has your kit"))

        // The owner takes over again from the phone: one generation higher, it beats both.
        var again = try phone.session()
        try again.takeOver(kit: world.kit, keep: ["tablet"])
        try world.settle(world.members) {
            try [phone, tablet].allSatisfy {
                let body = try $0.session().body
                return body.home == phoneID && body.takeoverGeneration == 2
            }
        }
        #expect(tablet.saw("THE VAULT WAS TAKEN OVER"))
        expectSempereError(.removed) { try laptop.session().list() }
        for member in [phone, tablet] { try world.expectEveryNote(on: member) }
    }

    @Test(
        "devices offline during a takeover: on return, a kept one shows the alert and reads on, a dropped one is removed",
        arguments: [1, 7, 42] as [UInt64])
    func offlineDuringTheTakeover(seed: UInt64) throws {
        var world = try World(seed: seed, more: ["desk"])
        defer { world.remove() }
        let (phone, tablet, desk) = (world["phone"], world["tablet"], world["desk"])
        var owner = try phone.session()
        try owner.takeOver(kit: world.kit, keep: ["desk"])
        world.notes[try owner.newNote(markdown: "# While they were away\n")] = "# While they were away\n"
        // Only the phone syncs for a while.
        try world.provider.settle(["phone"], rounds: 3)
        // Both come back.
        let phoneID = try phone.keys.id
        try world.settle(world.members) {
            try desk.session().body.home == phoneID && desk.session().list().notes.count == world.notes.count
                && tablet.delivered().home == phoneID
        }
        #expect(desk.saw("THE VAULT WAS TAKEN OVER") && desk.saw("This device was kept"))
        try world.expectEveryNote(on: desk)
        let removed = expectSempereError(.removed) { try tablet.session().list() }
        #expect(removed?.reason.isEmpty == false)
    }
}
