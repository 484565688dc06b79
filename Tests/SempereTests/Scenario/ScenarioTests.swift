import Age
import Foundation
import Sempere
import SiblingsCrypto
import Testing

/// The guide's model walked end to end (issue "Sempere, part 1", points 1–7 and 9) by three devices,
/// each with its own key store and its own copy of the vault folder, synced by a provider that holds
/// files back, reorders, duplicates, serves old versions and makes conflict copies.
@Suite("Sempere scenario: three devices over an unreliable provider")
struct ScenarioTests {
    final class Device {
        let name: String
        let store = InMemoryKeyStore()
        let keys: DeviceKeys
        let folder: VaultFolder
        var pin: VaultPin?

        init(_ name: String, root: URL) throws {
            self.name = name
            keys = try DeviceKeys.loadOrCreate(in: store, postQuantum: false)
            folder = VaultFolder(url: root.appendingPathComponent(name))
            try folder.create()
        }

        /// The vault as this device follows it (verified against its pin), and the pin moved on.
        func vault() throws -> SignedVault {
            let (vault, newPin, _) = try folder.vault(pinned: pin!)
            pin = newPin
            return vault
        }

        func readAll() throws -> (notes: [String: String], setAside: [String]) {
            let vault = try vault()
            let keyring = try VaultKeyring(
                vault: vault.body, credentials: keys, fileLists: EpochFileLists(folder: folder))
            var notes: [String: String] = [:]
            var setAside: [String] = []
            for path in try folder.notePaths() {
                do {
                    notes[path] =
                        try VaultNote.open(
                            try folder.readNote(at: path), path: path, vault: vault.body, keyring: keyring
                        )
                        .markdown
                } catch let error as SempereError where error.code == .untrustedNote {
                    setAside.append(path)
                }
            }
            return (notes, setAside + (try folder.setAside()))
        }

        func write(_ markdown: String) throws -> String {
            let vault = try vault()
            let path = VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
            try folder.writeNote(
                try VaultNote.seal(markdown: markdown, path: path, vault: vault.body, author: keys), at: path)
            return path
        }
    }

    /// Syncs until `condition` holds (the provider holds files back at random), or fails.
    static func settle(
        _ provider: SimulatedProvider, _ devices: [Device], sourceLocation: SourceLocation = #_sourceLocation,
        until condition: () throws -> Bool
    ) throws {
        var last: String = "false"
        for _ in 0..<40 {
            try provider.settle(devices.map(\.name), rounds: 1)
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

    /// Joins `device` through the provider, with the six words each way.
    static func join(_ device: Device, home: Device, provider: SimulatedProvider, all: [Device]) throws {
        let request = try JoinRequest(name: device.name, credentials: device.keys)
        try device.folder.write(request)
        let shownOnDevice = request.words.description
        try settle(provider, all) {
            try home.folder.requests().contains { $0.body.requestID == request.body.requestID }
        }
        let found = try JoinRequest.matching(words: shownOnDevice, in: try home.folder.requests())
        let approved = try JoinApproval.approve(
            found, typedWords: shownOnDevice, vault: try home.vault(), home: VaultHome(credentials: home.keys))
        let (vault, homeWords) = (approved.vault, approved.words)
        try home.folder.write(vault)
        home.pin = try vault.accept(pinned: home.pin!)
        try settle(provider, all) { try device.folder.unverifiedVault().body.device(device.keys.id) != nil }
        device.pin = try JoinApproval.accept(
            typedWords: homeWords.description, vault: try device.folder.unverifiedVault(), request: request,
            credentials: device.keys)
    }

    /// The stanza types in an age file's header (the lines starting "-> " before the "---" line).
    static func stanzaTypes(_ file: Data) -> [String] {
        let end = file.firstRange(of: Data("\n---".utf8))?.lowerBound ?? file.endIndex
        return String(decoding: file[..<end], as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("-> ") }.map { String($0.dropFirst(3).split(separator: " ").first ?? "") }
    }

    @Test("create, join two devices, write, remove one, under holds, reordering and duplicates", arguments: [1, 7, 42])
    func everydayLife(seed: UInt64) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-scenario-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let provider = SimulatedProvider(seed: seed)
        provider.holdBack = 0.3
        provider.duplicate = 0.2
        let home = try Device("ipad", root: root)
        let phone = try Device("iphone", root: root)
        let laptop = try Device("mac", root: root)
        let all = [home, phone, laptop]
        for device in all { provider.attach(device.name, folder: device.folder.url) }

        // 1, 2: each device makes its own key; the kit exists only on paper (returned, never stored).
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home.keys, postQuantum: false)
        try home.folder.write(created.vault)
        home.pin = created.pin
        for device in all {
            #expect(try device.store.list() == [DeviceKeys.ageIdentityName, DeviceKeys.signingKeyName].sorted())
        }

        // 7: the phone joins with six words each way, through the provider.
        try Self.join(phone, home: home, provider: provider, all: all)
        let first = try home.write("# From the iPad")
        let second = try phone.write("# From the iPhone")
        try Self.settle(provider, all) { try home.readAll().notes.count == 2 && phone.readAll().notes.count == 2 }
        #expect(try phone.readAll().notes[first] == "# From the iPad")
        #expect(try home.readAll().notes[second] == "# From the iPhone")
        // 3: every note is one stanza to the epoch's vault identity, however many devices there are.
        #expect(Self.stanzaTypes(try home.folder.readNote(at: first)) == ["X25519"])

        // 4: adding a device adds one wrap and rewrites no note.
        let before = try home.folder.noteReferences()
        try Self.join(laptop, home: home, provider: provider, all: all)
        #expect(try home.folder.noteReferences() == before)
        #expect(try home.vault().body.epochs.count == 1 && home.vault().body.currentEpoch.wraps.count == 4)
        try Self.settle(provider, all) { try laptop.readAll().notes.count == 2 }

        // 6: only home changes the list.
        let notHome = #expect(throws: SempereError.self) {
            try VaultHome(credentials: phone.keys).rename(deviceID: home.keys.id, to: "mine", in: try phone.vault())
        }
        #expect(notHome?.code == .notHome)

        // 5: removing the laptop starts a new epoch; it notices and stops; old notes stay readable.
        let references = try home.folder.noteReferences()
        let removal = try VaultHome(credentials: home.keys).remove(
            deviceID: laptop.keys.id, from: try home.vault(), existingNotes: references)
        try home.folder.write(removal.fileList)
        try home.folder.write(removal.vault)
        try Self.settle(provider, all) {
            try phone.vault().body.epochs.count == 2 && laptop.vault().body.epochs.count == 2
        }
        let removed = #expect(throws: SempereError.self) { try laptop.readAll() }
        #expect(removed?.code == .removed)
        let third = try phone.write("# After the removal")
        try Self.settle(provider, all) { try home.readAll().notes.count == 3 }
        #expect(try home.readAll().notes[first] == "# From the iPad")

        // A removed device writing after its removal: set aside by the others, never read, never deleted.
        let staleBody = created.vault.body  // what the laptop could still use to encrypt: an old epoch
        let late = VaultFolder.notePath(author: laptop.keys.id, noteID: VaultFolder.newNoteID())
        try laptop.folder.writeNote(
            try VaultNote.seal(
                markdown: "late", path: late,
                vault: Self.withDevice(laptop, in: staleBody), author: laptop.keys), at: late)
        try Self.settle(provider, all) { try home.folder.notePaths().contains(late) }
        let homeView = try home.readAll()
        #expect(homeView.setAside.contains(late) && homeView.notes[late] == nil && homeView.notes[third] != nil)

        // 9: an old vault.json served back is refused; the device keeps the list it has.
        try provider.serveOldVersion(of: VaultFolder.vaultFile, to: phone.name)
        let rollback = #expect(throws: SempereError.self) { try phone.vault() }
        #expect(rollback?.code == .rollback)
        try Self.settle(provider, all) { try phone.vault().body.epochs.count == 2 }

        // Conflict copies the provider makes are set aside, never read as notes, never deleted.
        provider.makeConflictCopy(of: first)
        try Self.settle(provider, all) { try phone.folder.setAside().contains { $0.contains("conflicted copy") } }
        let phoneView = try phone.readAll()
        #expect(phoneView.setAside.contains { $0.contains("conflicted copy") })
        #expect(phoneView.notes[first] == "# From the iPad")
    }

    /// A body listing `device` (the removed laptop's own stale view, which still lists it).
    static func withDevice(_ device: Device, in body: VaultBody) -> VaultBody {
        var body = body
        if body.device(device.keys.id) == nil {
            body.devices.append(
                VaultBody.Device(
                    id: device.keys.id, name: device.name,
                    signingKey: device.keys.signingKey.publicKey.rawRepresentation,
                    wrapRecipient: device.keys.identity.recipientString, addedIn: 1))
        }
        return body
    }
}
