import Age
import Foundation
import Sempere
import Testing

/// Part 3 of the guide (Re-encrypt Everything, files that arrive late, Repair) and the versions beyond it,
/// walked by devices that each run a ``VaultSession`` on their own configuration and their own copy of the
/// folder, over the ``SimulatedProvider`` (files held back, reordered, duplicated, deletions delayed), under
/// three seeds.
@Suite("Sempere scenario: re-encryption, late files and rollbacks over an unreliable provider")
struct ReencryptScenarioTests {
    typealias World = HomeRoleScenarioTests.World
    typealias Member = HomeRoleScenarioTests.Member

    /// The note files in `member`'s copy of the folder that `identity` opens.
    static func opened(by identity: WrapIdentity, in member: Member) throws -> [String] {
        try noteFilesOpened(in: member.folder, by: identity)
    }

    /// The identity of `epoch` as `member`'s device could unwrap it from `body`.
    static func epochKey(_ member: Member, epoch: Int, in body: VaultBody) throws -> WrapIdentity {
        try epochIdentity(try member.keys, epoch: epoch, in: body)
    }

    @Test(
        "Re-encrypt Everything under faults: every device reads every note by its author, and old keys open nothing",
        arguments: [1, 7, 42] as [UInt64])
    func reencryptEverything(seed: UInt64) throws {
        var world = try World(seed: seed, more: ["desk"])
        defer { world.remove() }
        let (laptop, phone, tablet, desk) = (world["laptop"], world["phone"], world["tablet"], world["desk"])
        // Home removes the desk, which keeps epoch 1's key; then re-encrypts everything with the kit.
        let deskKey = try Self.epochKey(desk, epoch: 1, in: try laptop.session().body)
        var home = try laptop.session()
        try home.remove(device: try home.device(matching: "desk"))
        let result = try home.reencryptEverything(currentKit: world.kit)
        try home.kitShown()
        #expect(result.count == world.notes.count)
        let listed = [laptop, phone, tablet]
        let authors = Dictionary(uniqueKeysWithValues: try home.list().notes.map { ($0.path, $0.author) })
        // Over the provider: every listed device follows, removes its old files (the deletions reach the others
        // in their time), and reads every note.
        try world.settle(listed) {
            // Every device runs its command each round (each removes its own old files as it lists).
            try listed.map { member in
                let listing = try member.session().list()
                let notes = listing.notes
                return notes.count == world.notes.count && notes.allSatisfy { $0.file.hasPrefix("reencrypted/") }
                    && notes.allSatisfy { authors[$0.path] == $0.author && world.notes[$0.path] == $0.markdown }
                    && listing.waitingForRemoval.isEmpty
            }.allSatisfy { $0 }
        }
        for member in listed {
            #expect(
                try Self.opened(by: deskKey, in: member).isEmpty, "\(member.name) holds a file the desk's key opens")
            #expect(try member.session().list().setAside.isEmpty)
        }
        #expect(try laptop.session().list().waitingForRemoval.isEmpty)
        // New notes after it are readable everywhere, and the next edit of a re-encrypted note is its author's.
        let phoneNote = try #require(world.notes.keys.first { authors[$0] == (try? phone.keys.id) })
        try phone.session().updateNote(at: phoneNote, markdown: "# From the phone, later\n")
        world.notes[phoneNote] = "# From the phone, later\n"
        try world.settle(listed) {
            try listed.allSatisfy {
                try $0.session().list().notes.contains { $0.markdown == "# From the phone, later\n" }
            }
                && !FileManager.default.fileExists(
                    atPath: laptop.folder.appendingPathComponent(ReencryptionList.copyPath(of: phoneNote)).path)
        }
    }

    @Test(
        "late files under faults: a device offline during a removal re-encrypts what it wrote once it sees it",
        arguments: [1, 7, 42] as [UInt64])
    func lateFiles(seed: UInt64) throws {
        var world = try World(seed: seed)
        defer { world.remove() }
        let (laptop, phone, tablet) = (world["laptop"], world["phone"], world["tablet"])
        let tabletKey = try Self.epochKey(tablet, epoch: 1, in: try laptop.session().body)
        var home = try laptop.session()
        try home.remove(device: try home.device(matching: "tablet"))
        // The phone is offline: it has not seen the removal and writes under epoch 1's key.
        let late = try phone.session().newNote(markdown: "# Written on the train\n")
        world.notes[late] = "# Written on the train\n"
        // Back online: it syncs, sees the removal on its next command, and writes the note again.
        try world.settle([laptop, phone]) {
            _ = try phone.session()
            let notes = try laptop.session().list().notes
            return notes.contains { $0.path == late && $0.keyEpoch == 2 && $0.version == 2 }
        }
        try world.settle([laptop, phone]) { try Self.opened(by: tabletKey, in: laptop).contains(late) == false }
        #expect(try phone.session().list().notes.first { $0.path == late }?.markdown == "# Written on the train\n")
        // The removed tablet, offline too, wrote after its removal: set aside everywhere, restored on request.
        let tabletLate = try tablet.session().newNote(markdown: "# Written after I was removed\n")
        try world.settle(world.members) {
            try laptop.session().list().setAside.contains { $0.path == tabletLate }
        }
        let entry = try #require(try laptop.session().list().setAside.first { $0.path == tabletLate })
        #expect(entry.category == .fromBeforeADeviceChange)
        let restored = try laptop.session().repairRestore(entry)
        try world.settle([laptop, phone]) {
            try phone.session().list().notes.contains {
                $0.path == restored.path && $0.markdown == "# Written after I was removed\n"
            }
        }
    }

    @Test(
        "the provider puts back an old version and a deleted note: set aside or pending, never shown as current",
        arguments: [1, 7, 42] as [UInt64])
    func rollbacks(seed: UInt64) throws {
        let world = try World(seed: seed)
        defer { world.remove() }
        let (laptop, phone, tablet) = (world["laptop"], world["phone"], world["tablet"])
        let path = try phone.session().newNote(markdown: "# Budget\nv1\n")
        try world.settle(world.members) { try tablet.session().list().notes.contains { $0.path == path } }
        try phone.session().updateNote(at: path, markdown: "# Budget\nv2\n")
        try world.settle(world.members) {
            try tablet.session().list().notes.contains { $0.path == path && $0.markdown == "# Budget\nv2\n" }
        }
        // The provider puts version 1 back for everyone: the tablet, which showed version 2, sets it aside.
        world.provider.putBackOldVersion(of: path)
        try world.settle([laptop, tablet]) {
            try tablet.session().list().setAside.contains { $0.path == path && $0.category == .oldVersionPutBack }
        }
        #expect(try tablet.session().list().notes.contains { $0.path == path } == false)
        // Its author, the phone, sets it aside too, and its Repair makes that text the newest version, which
        // every device then shows.
        try world.settle(world.members) {
            try phone.session().list().setAside.contains { $0.path == path && $0.category == .oldVersionPutBack }
        }
        let restored = try phone.session().repairRestore(try phone.session().setAsideEntry(path))
        #expect(restored.path == path && restored.removedSetAside)
        try world.settle(world.members) {
            try tablet.session().list().notes.contains { $0.path == path && $0.version == 3 }
        }

        // A deleted note put back.
        let gone = try phone.session().newNote(markdown: "# Delete me\n")
        try world.settle(world.members) { try laptop.session().list().notes.contains { $0.path == gone } }
        try phone.session().removeNote(at: gone)
        try world.settle(world.members) { try laptop.session().list().notes.contains { $0.path == gone } == false }
        world.provider.putBackOldVersion(of: gone)
        try world.settle([laptop, tablet]) {
            return try laptop.session().list().setAside.contains {
                $0.path == gone && $0.category == .deletedNotePutBack
            }
        }
        #expect(try laptop.session().list().notes.contains { $0.path == gone } == false)
    }
}
