import Foundation
import Sempere
import Testing

/// `VaultSession` as an app embeds it: the checks the CLI relies on hold without the CLI.
@Suite("Sempere VaultSession: the library session an app opens")
struct VaultSessionTests {
    /// Two devices, each with its own configuration root, in one vault folder; `now` is the joining clock.
    struct Pair {
        let root: URL
        let folder: URL
        var home: VaultSession
        var phone: VaultSession

        init(now: Date = Date()) throws {
            root = try temporaryDirectory()
            folder = root.appendingPathComponent("vault")
            home = try VaultSession.create(
                folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil,
                configRoot: root.appendingPathComponent("home")
            ).session
            let phoneRoot = root.appendingPathComponent("phone")
            let request = try VaultSession.askToJoin(folder: folder, name: "Phone", configRoot: phoneRoot, now: now)
            let approved = try home.approve(.words(request.words.description))
            phone = try VaultSession.finishJoin(
                folder: folder, check: .words(approved.words.description), configRoot: phoneRoot, now: now)
        }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test("notes: the author shown is the signer; a note moved into another device's folder is set aside and kept")
    func authorship() throws {
        var pair = try Pair()
        defer { pair.remove() }
        let homeNote = try pair.home.newNote(markdown: "# Taxes\n")
        #expect(try pair.phone.list().notes.map(\.author) == [pair.home.keys.id])

        // The provider moves home's note into the phone's folder: set aside for both, and kept by rm.
        let moved = "notes/\(pair.phone.keys.id)/\(VaultSession.noteID(homeNote)).age"
        try FileManager.default.createDirectory(
            at: pair.folder.appendingPathComponent("notes/\(pair.phone.keys.id)"), withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            at: pair.folder.appendingPathComponent(homeNote), to: pair.folder.appendingPathComponent(moved))
        let listing = try pair.phone.list()
        #expect(listing.notes.isEmpty && listing.setAside.map(\.path) == [moved])
        #expect(listing.setAside[0].reason.contains("not by the device whose folder holds it"))
        // Home's own file is gone, so the note is pending, and nothing is removed.
        expectSempereError(.notFound) { try pair.phone.removeNote(at: moved) }
        #expect(FileManager.default.fileExists(atPath: pair.folder.appendingPathComponent(moved).path))

        // An edit that empties this device's own note is refused; the note is unchanged.
        let own = try pair.phone.newNote(markdown: "# Groceries\nmilk\n")
        expectSempereError(.emptyNote) { try pair.phone.updateNote(at: own, markdown: " \n\n") }
        #expect(try pair.phone.open(notePath: own).markdown == "# Groceries\nmilk\n")
        // Home, meanwhile, renames and the phone follows.
        try pair.home.rename(device: try pair.home.device(matching: "phone"), to: "Work phone")
        #expect(
            try VaultSession(configRoot: pair.root.appendingPathComponent("phone")).name(of: pair.phone.keys.id)
                == "Work phone")
    }

    @Test("a note longer than the index keeps: listed by title without its text, read whole by cat and search")
    func longNotes() throws {
        let pair = try Pair()
        defer { pair.remove() }
        let long = "# Long\n" + String(repeating: "0123456789abcdef\n", count: 5_000)  // 85 KB, over 64 KiB
        let path = try pair.phone.newNote(markdown: long)
        let short = try pair.phone.newNote(markdown: "# Short\nkept whole\n")
        // Listed once with its text (the index is cold), then by title alone: the index keeps no long text.
        #expect(try pair.home.list().notes.first { $0.path == path }?.markdown == long)
        let titles = try pair.home.list(withText: false).notes
        #expect(titles.first { $0.path == path }.map { ($0.title, $0.markdown) } ?? ("", "x") == ("Long", ""))
        #expect(titles.first { $0.path == short }?.markdown == "# Short\nkept whole\n")
        let index = try Data(contentsOf: pair.home.state.noteIndexFile(root: pair.home.configRoot))
        #expect(index.count < 20_000, "the index holds the long text: \(index.count) bytes")
        // Asked for, the text is there whole: cat (open) and a listing with text open the file again.
        #expect(try pair.home.open(notePath: path).markdown == long)
        #expect(try pair.home.list().notes.first { $0.path == path }?.markdown == long)
    }

    @Test("the join window: the new device refuses home's words once its request is older than the lifetime")
    func joinWindow() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("vault")
        var home = try VaultSession.create(
            folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil,
            configRoot: root.appendingPathComponent("home")
        ).session
        let phoneRoot = root.appendingPathComponent("phone")
        let start = Date()
        let request = try VaultSession.askToJoin(folder: folder, name: "Phone", configRoot: phoneRoot, now: start)
        let approved = try home.approve(.code(request.code))
        let late = start.addingTimeInterval(JoinRequest.lifetime + 60)
        expectSempereError(.expired) {
            try VaultSession.finishJoin(
                folder: folder, check: .words(approved.words.description), configRoot: phoneRoot, now: late)
        }
        // Asking again replaces the request; home, which listed the phone already, approves the new one.
        let again = try VaultSession.askToJoin(folder: folder, name: "Phone", configRoot: phoneRoot, now: late)
        home = try VaultSession(configRoot: root.appendingPathComponent("home"), now: late)
        let reapproved = try home.approve(.words(again.words.description))
        #expect(reapproved.alreadyListed)
        let phone = try VaultSession.finishJoin(
            folder: folder, check: .code(reapproved.code), configRoot: phoneRoot, now: late.addingTimeInterval(30))
        #expect(phone.body.device(phone.keys.id) != nil)
        #expect(try VaultFolder(url: folder).requests().isEmpty)
    }

    @Test("errors say what is wrong in words: a damaged vault.json, a file where the vault folder should go")
    func plainErrors() throws {
        let pair = try Pair()
        defer { pair.remove() }
        try Data("{\"format\": \"sempere-vault-v1\", \"body\": 12}".utf8).write(
            to: pair.folder.appendingPathComponent("vault.json"))
        let damaged = expectSempereError(.malformedVault) {
            try VaultSession(configRoot: pair.root.appendingPathComponent("phone"))
        }
        #expect(damaged?.reason.contains("DecodingError") == false, "\(String(describing: damaged))")
        #expect(damaged?.reason.contains("\"body\"") == true, "\(String(describing: damaged))")

        let blocker = pair.root.appendingPathComponent("blocker")
        try Data("x".utf8).write(to: blocker)
        let inTheWay = expectSempereError(.io) {
            try VaultSession.create(
                folder: blocker.appendingPathComponent("vault"), homeName: "Desk", postQuantum: false,
                passphrase: nil, configRoot: pair.root.appendingPathComponent("desk"))
        }
        // Said in words (a file is where the folder should go), not as Foundation's domain and code.
        let reason = inTheWay?.reason ?? ""
        #expect(
            reason.contains("cannot create") && reason.contains("blocker is a file, not a folder"), "\(reason)")
        #expect(!reason.contains("NSCocoaErrorDomain") && !reason.contains("The operation could not be completed"))
    }
}
