import Foundation
import Sempere
import Testing

/// Any listed device edits and deletes any note (docs/sempere-format.md, "Editing any note"): each writes its
/// version in its own folder, signing the versions it replaces; versions nothing replaced are the note, two of
/// them a conflict, kept until a device writes one that replaces both.
@Suite("Sempere: any device edits and deletes any note, and conflicts keep both versions")
struct VaultSessionEditingTests {
    /// Home, the phone, and a third device, the tablet; each opened afresh at every use, as each `sempere`
    /// command opens the vault (a session keeps the device list it opened with).
    struct Three {
        let pair: VaultSessionTests.Pair
        var home: VaultSession { get throws { try open("home") } }
        var phone: VaultSession { get throws { try open("phone") } }
        var tablet: VaultSession { get throws { try open("tablet") } }

        init() throws {
            var pair = try VaultSessionTests.Pair()
            self.pair = pair
            let root = pair.root.appendingPathComponent("tablet")
            let request = try VaultSession.askToJoin(folder: pair.folder, name: "Tablet", configRoot: root)
            let approved = try pair.home.approve(.words(request.words.description))
            _ = try VaultSession.finishJoin(
                folder: pair.folder, check: .words(approved.words.description), configRoot: root)
        }

        func open(_ device: String) throws -> VaultSession {
            try VaultSession(configRoot: pair.root.appendingPathComponent(device))
        }

        func remove() { pair.remove() }
        func exists(_ path: String) -> Bool {
            FileManager.default.fileExists(atPath: pair.folder.appendingPathComponent(path).path)
        }
        func path(_ session: VaultSession, _ note: String) -> String {
            "notes/\(session.keys.id)/\(VaultSession.noteID(note)).age"
        }
        /// Every device's view of the note: its text, or why it is not shown.
        func views(_ note: String) -> [String] {
            ["home", "phone", "tablet"].map { device in
                do { return try open(device).open(notePath: note).markdown } catch { return "\(error)" }
            }
        }
    }

    @Test("the phone edits home's note: every device shows the phone's version, signed by it; home's file goes")
    func editAnotherDevicesNote() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# Taxes\n2025\n")
        try three.phone.updateNote(at: note, markdown: "# Taxes\n2025, filed\n")
        #expect(three.views(note) == Array(repeating: "# Taxes\n2025, filed\n", count: 3))
        let shown = try #require(try three.tablet.list().notes.first)
        #expect(try shown.author == three.phone.keys.id && shown.version == 1)
        #expect(try shown.replaces == [three.home.keys.id: 1] && shown.otherVersions.isEmpty)
        // Home's own listing removed its replaced file, and its manifest no longer lists it as a note.
        #expect(try three.home.list().waitingForRemoval.isEmpty)
        #expect(!three.exists(note))
        #expect(try three.tablet.list().pending.isEmpty)
        // Home edits again: its next version replaces the phone's, and the phone's file goes in turn.
        try three.home.updateNote(at: note, markdown: "# Taxes\n2025, filed, refunded\n")
        #expect(three.views(note) == Array(repeating: "# Taxes\n2025, filed, refunded\n", count: 3))
        let again = try #require(try three.tablet.list().notes.first)
        #expect(try again.author == three.home.keys.id && again.version == 2)
        _ = try three.phone.list()
        #expect(try !three.exists(three.path(three.phone, note)))
        #expect(try three.phone.list().notes.count == 1 && three.phone.list().pending.isEmpty)
    }

    @Test("the phone deletes home's note on every device, home's file goes, and the phone's trash restores it")
    func deleteAnotherDevicesNote() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# Old plan\n")
        try three.phone.removeNote(at: note)
        for session in [try three.home, try three.phone, try three.tablet] {
            let listing = try session.list()
            #expect(listing.notes.isEmpty && listing.pending.isEmpty && listing.setAside.isEmpty)
        }
        #expect(!three.exists(note), "home's listing removes its own file of a note another device deleted")
        let restored = try three.phone.restoreFromTrash(VaultSession.noteID(note))
        #expect(try restored == three.path(three.phone, note))
        #expect(three.views(note) == Array(repeating: "# Old plan\n", count: 3))
    }

    @Test("two devices edit one note offline: both versions stay, shown as a conflict, until a third resolves it")
    func conflictResolvedOnAThirdDevice() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# Trip\n")
        // Each starts from version 1, before it has seen the other's edit.
        let homeDraft = try three.home.draft(of: note)
        let phoneDraft = try three.phone.draft(of: note)
        try three.home.updateNote(at: note, markdown: "# Trip\nby train\n", replacing: homeDraft)
        try three.phone.updateNote(at: note, markdown: "# Trip\nby bike\n", replacing: phoneDraft)
        let listing = try three.tablet.list()
        #expect(listing.notes.count == 2 && Set(listing.notes.map(\.id)).count == 1)
        #expect(listing.notes.allSatisfy { $0.otherVersions.count == 1 })
        let error = expectSempereError(.conflict) { try three.tablet.open(notePath: note) }
        #expect(error?.reason.contains("2 versions") == true)
        let draft = try three.tablet.draft(of: note)
        #expect(draft.markdown.contains("by train") && draft.markdown.contains("by bike"))
        #expect(draft.markdown.hasPrefix("<<<<<<< ") && draft.markdown.contains("\n======= "))
        #expect(draft.markdown.contains("Laptop, version 2\n") && draft.markdown.contains("Phone, version 1\n"))
        // The tablet merges them: one version, replacing both, and both writers' files go.
        try three.tablet.updateNote(at: note, markdown: "# Trip\nby train, bikes on board\n", replacing: draft)
        #expect(three.views(note) == Array(repeating: "# Trip\nby train, bikes on board\n", count: 3))
        #expect(try !three.exists(note) && !three.exists(three.path(three.phone, note)))
        #expect(try three.home.list().notes.map(\.author) == [three.tablet.keys.id])
    }

    @Test("resolve keeps one device's version; an edit that arrives meanwhile is kept beside, never lost")
    func resolveAndLateArrivals() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# List\n")
        let homeDraft = try three.home.draft(of: note)
        let phoneDraft = try three.phone.draft(of: note)
        try three.home.updateNote(at: note, markdown: "# List\nmilk\n", replacing: homeDraft)
        try three.phone.updateNote(at: note, markdown: "# List\neggs\n", replacing: phoneDraft)
        expectSempereError(.notFound) { try three.tablet.resolveConflict(at: note, keeping: "nobody") }
        try three.tablet.resolveConflict(at: note, keeping: "phone")
        #expect(three.views(note) == Array(repeating: "# List\neggs\n", count: 3))
        expectSempereError(.notFound) { try three.tablet.resolveConflict(at: note, keeping: "phone") }

        // The phone starts an edit; home edits meanwhile; the phone's save replaces only what it started from.
        let started = try three.phone.draft(of: note)
        try three.home.updateNote(at: note, markdown: "# List\neggs, bread\n")
        try three.phone.updateNote(at: note, markdown: "# List\neggs, butter\n", replacing: started)
        let versions = try three.tablet.versions(of: note).map(\.markdown).sorted()
        #expect(versions == ["# List\neggs, bread\n", "# List\neggs, butter\n"])
    }

    @Test("an edit rolled back to an older version does not bring back the version the newer one replaced")
    func aRolledBackEditShowsNothingStale() throws {
        let three = try Three()
        defer { three.remove() }
        let folder = three.pair.folder
        let note = try three.home.newNote(markdown: "# Note\nv1\n")
        let homeDraft = try three.home.draft(of: note)
        try three.phone.updateNote(at: note, markdown: "# Note\nphone\n")
        let phoneFile = try three.path(three.phone, note)
        let phoneFirst = try Data(contentsOf: folder.appendingPathComponent(phoneFile))
        try three.home.updateNote(at: note, markdown: "# Note\nhome\n", replacing: homeDraft)
        // The phone merges the conflict (its version 2 replaces home's version 2); the tablet shows it.
        try three.phone.updateNote(at: note, markdown: "# Note\nmerged\n")
        #expect(try three.tablet.list().notes.map(\.markdown) == ["# Note\nmerged\n"])
        // The provider puts the phone's version 1 back, which replaced only home's version 1: home's version 2,
        // still in the folder (home has not listed since), must not show as the note meanwhile.
        try phoneFirst.write(to: folder.appendingPathComponent(phoneFile))
        let listing = try three.tablet.list()
        #expect(listing.notes.isEmpty, "\(listing.notes.map(\.markdown))")
        #expect(listing.pending.map(\.path) == [phoneFile] && listing.pending.first?.expected == 2)
        #expect(listing.setAside.map(\.category) == [.oldVersionPutBack])
    }

    @Test("two edits of one note on one device at once: the later save keeps both texts, between markers")
    func twoEditsOnOneDevice() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.phone.newNote(markdown: "# Log\n")
        let first = try three.phone.draft(of: note)
        let second = try three.phone.draft(of: note)
        try three.phone.updateNote(at: note, markdown: "# Log\nmonday\n", replacing: first)
        try three.phone.updateNote(at: note, markdown: "# Log\ntuesday\n", replacing: second)
        let text = try three.home.open(notePath: note).markdown
        #expect(text.contains("monday") && text.contains("tuesday") && text.hasPrefix("<<<<<<< "), "\(text)")
        // A device removes a note twice (an edit elsewhere survived the first): the trash keeps both removals.
        let homeDraft = try three.home.draft(of: note)
        try three.phone.removeNote(at: note)
        try three.home.updateNote(at: note, markdown: "# Log\nwednesday\n", replacing: homeDraft)
        try three.phone.removeNote(at: note)
        #expect(try three.phone.trash().filter { $0.id == VaultSession.noteID(note) }.count == 2)
        _ = try three.phone.restoreFromTrash(VaultSession.noteID(note))
        #expect(try three.tablet.open(notePath: note).markdown == "# Log\nwednesday\n")
    }

    @Test("an edit made while another device deletes the note survives the deletion")
    func editWinsOverAConcurrentDelete() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# Ideas\n")
        let homeDraft = try three.home.draft(of: note)
        try three.phone.removeNote(at: note)
        try three.home.updateNote(at: note, markdown: "# Ideas\nkeep this\n", replacing: homeDraft)
        #expect(three.views(note) == Array(repeating: "# Ideas\nkeep this\n", count: 3))
    }

    @Test("the provider cannot hold a version back, put a replaced one back, or forge what a version replaces")
    func providerAttacksOnEdits() throws {
        let three = try Three()
        defer { three.remove() }
        let folder = three.pair.folder
        let note = try three.home.newNote(markdown: "# Budget\n100\n")
        _ = try three.tablet.list()
        try three.phone.updateNote(at: note, markdown: "# Budget\n120\n")
        let phoneFile = try three.path(three.phone, note)
        let phoneBytes = try Data(contentsOf: folder.appendingPathComponent(phoneFile))

        // Held back: the phone's manifest lists its version, the file has not come. The tablet does not show
        // home's version as current meanwhile: the note is pending.
        try FileManager.default.removeItem(at: folder.appendingPathComponent(phoneFile))
        let held = try three.tablet.list()
        #expect(held.notes.isEmpty && held.pending.map(\.path) == [phoneFile], "\(held.notes.map(\.markdown))")
        expectSempereError(.notFound) { try three.tablet.open(notePath: note) }
        try phoneBytes.write(to: folder.appendingPathComponent(phoneFile))

        // Put back: home's replaced file, after home removed it. Superseded (never shown), and removed again.
        let homeBytes = try Data(contentsOf: folder.appendingPathComponent(note))
        _ = try three.home.list()
        #expect(!three.exists(note))
        try homeBytes.write(to: folder.appendingPathComponent(note))
        #expect(try three.tablet.list().notes.map(\.markdown) == ["# Budget\n120\n"])
        _ = try three.home.list()
        #expect(!three.exists(note))

        // Rolled back: the phone writes version 2; the provider puts its version 1 back. The tablet, which showed
        // version 2, sets version 1 aside and waits for 2: home's replaced version is not shown meanwhile.
        try three.phone.updateNote(at: note, markdown: "# Budget\n130\n")
        #expect(try three.tablet.list().notes.map(\.markdown) == ["# Budget\n130\n"])
        let second = try Data(contentsOf: folder.appendingPathComponent(phoneFile))
        try phoneBytes.write(to: folder.appendingPathComponent(phoneFile))
        try homeBytes.write(to: folder.appendingPathComponent(note))
        let rolledBack = try three.tablet.list()
        #expect(rolledBack.notes.isEmpty, "\(rolledBack.notes.map(\.markdown))")
        #expect(rolledBack.setAside.map(\.path) == [phoneFile])
        expectSempereError(.untrustedNote) { try three.tablet.open(notePath: note) }
        try second.write(to: folder.appendingPathComponent(phoneFile))
        #expect(try three.tablet.list().notes.map(\.markdown) == ["# Budget\n130\n"])

        // Forged: the phone's version moved into the tablet's folder (its line changed: VaultTests.replacesIsSigned).
        let moved = try three.path(three.tablet, note)
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent(moved).deletingLastPathComponent(), withIntermediateDirectories: true)
        try phoneBytes.write(to: folder.appendingPathComponent(moved))
        let listing = try three.home.list()
        #expect(listing.setAside.map(\.path) == [moved] && listing.notes.map(\.markdown) == ["# Budget\n130\n"])
        try FileManager.default.removeItem(at: folder.appendingPathComponent(moved))
    }

    @Test("a removed device's notes stay editable by the devices that remain; home removes its replaced file")
    func removedDevicesNotesStayEditable() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.phone.newNote(markdown: "# Phone's recipe\n")
        _ = try three.home.list()
        var home = try three.home
        try home.remove(device: try home.device(matching: "Phone"))
        #expect(try three.tablet.open(notePath: note).author == three.phone.keys.id)
        try three.tablet.updateNote(at: note, markdown: "# Phone's recipe\nmore salt\n")
        #expect(try three.home.open(notePath: note).markdown == "# Phone's recipe\nmore salt\n")
        #expect(!three.exists(note), "home removes the removed device's file the tablet's version replaced")
        #expect(try three.tablet.open(notePath: note).author == three.tablet.keys.id)
    }

    @Test("a device never drops its own file for a version no device could have replaced")
    func anImpossibleReplacementIsNotFollowed() throws {
        let three = try Three()
        defer { three.remove() }
        let note = try three.home.newNote(markdown: "# Mine\n")
        // The phone (a listed device gone wrong) claims to replace version 99 of home's note.
        let draft = try three.phone.draft(of: note)
        var inflated = draft.replaces
        inflated[try three.home.keys.id] = 99
        try three.phone.updateNote(
            at: note, markdown: "# Mine\nnot really\n",
            replacing: VaultSession.Draft(id: draft.id, markdown: draft.markdown, replaces: inflated))
        // Home keeps its own file and shows both versions: its own was never replaced as far as it knows.
        _ = try three.home.list()
        #expect(three.exists(note))
        #expect(try three.home.versions(of: note).count == 2)
    }
}
