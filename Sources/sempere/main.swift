import CommandLineKit
import Foundation
import Sempere

#if canImport(Glibc)
    import Glibc
#endif

/// `sempere`: a notes vault on any synced folder (README.md, docs/sempere-format.md).
///
/// Every command that reads the vault first checks vault.json against the pin this device keeps
/// (`DeviceState`), so a rolled-back or swapped vault is refused, and then saves the newer pin.
struct SempereCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sempere",
        abstract: "A notes vault on any synced folder: every note is an age file, every device has its own key.",
        discussion: """
            Start with `sempere create <folder> --name <device>` on the first device (it becomes home, which \
            manages devices), or `sempere join <folder> --name <device>` on another one. This device's keys and \
            state live in --config, else $SEMPERE_CONFIG, else $XDG_CONFIG_HOME/sempere, else ~/.config/sempere.
            """,
        version: "sempere 0.1.0",
        subcommands: [
            Create.self, Join.self, Devices.self, New.self, List.self, Cat.self, Remove.self, Search.self,
            Import.self, Export.self, Edit.self, Kit.self,
        ])
}

// MARK: - Shared pieces

let streams = StandardStreams()

/// Says what went wrong on standard error and returns the failure status to throw.
func failure(_ message: String) -> ExitCode {
    streams.err("sempere: error: \(message)")
    return .failure
}

/// Runs `body`, turning the library's errors into a message on standard error and exit status 1.
func reporting(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as SempereError {
        throw failure(error.reason)
    } catch let error as ExitCode {
        throw error
    } catch {
        throw failure("\(error)")
    }
}

func printJSON(_ value: Any) throws {
    let data = try JSONSerialization.data(
        withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    streams.out(String(decoding: data, as: UTF8.self))
}

func absolutePath(_ path: String) -> String {
    let url =
        path.hasPrefix("/")
        ? URL(fileURLWithPath: path)
        : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
    return url.standardizedFileURL.path
}

/// This device: its configuration root and key store.
struct Device {
    let root: URL
    let store: FileKeyStore

    init(config: String?) throws {
        root = try DeviceState.configRoot(override: config, environment: ProcessInfo.processInfo.environment)
        store = try FileKeyStore(directory: DeviceState.keyStoreDirectory(root: root))
    }

    /// The device's keys, which `create` or `join` made.
    func keys() throws -> DeviceKeys {
        guard let keys = try DeviceKeys.load(from: store) else {
            throw failure(
                "this device has no keys in \(store.directory.path): run `sempere create` or `sempere join` first")
        }
        return keys
    }
}

/// A vault this device is in, verified against its pin; the new pin is saved.
struct OpenVault {
    let device: Device
    let keys: DeviceKeys
    let state: DeviceState
    let folder: VaultFolder
    let vault: SignedVault

    init(config: String?, vault path: String?) throws {
        device = try Device(config: config)
        keys = try device.keys()
        var state = try DeviceState.find(root: device.root, folder: path.map(absolutePath))
        folder = VaultFolder(url: URL(fileURLWithPath: state.folder))
        let (vault, pin, refused) = try folder.vault(pinned: state.pin)
        for (name, error) in refused { streams.err("sempere: warning: \(name) refused: \(error.reason)") }
        if pin != state.pin {
            state.pin = pin
            try state.save(root: device.root)
        }
        self.state = state
        self.vault = vault
    }

    var body: VaultBody { vault.body }

    func keyring() throws -> VaultKeyring { try VaultKeyring(vault: body, credentials: keys) }

    /// A device's name, listed or removed.
    func name(of id: String) -> String {
        body.device(id)?.name ?? body.removed.first { $0.device.id == id }?.device.name ?? String(id.prefix(8))
    }

    /// Writes vault.json after a change home made, and follows it.
    func publish(_ updated: SignedVault) throws {
        try folder.write(updated)
        var state = self.state
        state.pin = try updated.accept(pinned: state.pin)
        try state.save(root: device.root)
    }

    /// The device named by a name or an id prefix.
    func device(matching text: String) throws -> VaultBody.Device {
        let byName = body.devices.filter { $0.name == text }
        if byName.count == 1 { return byName[0] }
        let byID = body.devices.filter { $0.id.hasPrefix(text.lowercased()) }
        if byName.isEmpty, byID.count == 1, !text.isEmpty { return byID[0] }
        if byName.count > 1 || byID.count > 1 {
            throw failure("\"\(text)\" names more than one device: use more of its id (`sempere devices list`)")
        }
        throw failure("no device \"\(text)\" in this vault: see `sempere devices list`")
    }

    /// A note read and checked, or why it was set aside.
    struct Entry {
        let path: String
        let id: String
        let author: String
        let modified: Date?
        let result: Result<VaultNote.Opened, SempereError>

        var title: String {
            guard case .success(let note) = result else { return "" }
            return noteTitle(note.markdown)
        }
    }

    /// Every note, opened and checked through this device's encrypted note index: only the notes that
    /// changed since the last listing are opened again.
    func entries() throws -> [Entry] {
        let indexFile = state.noteIndexFile(root: device.root)
        var index = NoteIndex.load(from: indexFile, identity: keys.identity)
        let results = try index.refresh(folder: folder, vault: vault, keyring: try keyring())
        try index.save(to: indexFile, identity: keys.identity)
        return results.map { path, result in
            let parts = path.split(separator: "/")
            let modified =
                (try? FileManager.default.attributesOfItem(atPath: folder.url.appendingPathComponent(path).path))?[
                    .modificationDate] as? Date
            return Entry(
                path: path, id: String(parts[2].dropLast(4)), author: String(parts[1]), modified: modified,
                result: result)
        }
    }

    /// The note path named by a note id or a unique start of one.
    func notePath(matching text: String) throws -> String {
        let wanted = text.lowercased()
        let matches = try folder.notePaths().filter { path in
            path == text || path.split(separator: "/")[2].dropLast(4).hasPrefix(wanted)
        }
        guard !wanted.isEmpty, let first = matches.first else {
            throw failure("no note \"\(text)\" in this vault: see `sempere ls`")
        }
        guard matches.count == 1 else { throw failure("\"\(text)\" starts more than one note id: use more of it") }
        return first
    }

    /// The note at `path`, opened and checked; a note whose checks fail is never shown.
    func open(_ path: String) throws -> VaultNote.Opened {
        try VaultNote.open(try folder.readNote(at: path), path: path, vault: body, keyring: try keyring())
    }

    /// Seals `markdown` as this device's note at `path` (a new one when nil); returns the path.
    @discardableResult
    func write(_ markdown: String, at path: String? = nil) throws -> String {
        let path = path ?? VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
        try folder.writeNote(try VaultNote.seal(markdown: markdown, path: path, vault: body, author: keys), at: path)
        return path
    }
}

func noteTitle(_ markdown: String) -> String {
    let line = markdown.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? ""
    let title = line.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces)
    return title.isEmpty ? "(untitled)" : title
}

func noteID(_ path: String) -> String { String(path.split(separator: "/")[2].dropLast(4)) }

func isoDate(_ date: Date?) -> String { date.map { ISO8601DateFormatter().string(from: $0) } ?? "" }

func readStandardInput() -> String {
    String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
}

/// A QR code for the terminal, or nothing when it cannot be made (the words or string suffice).
func terminalQR(_ payload: some DataProtocol) -> String {
    (try? QRCode(payload).terminalText()) ?? ""
}

// MARK: - create

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a vault in a folder, with this device as its home, and print the recovery kit.",
        discussion: """
            Makes this device's keys (once), the vault and its folder layout, and prints the recovery kit: its \
            secret and a QR code of it. The kit is shown only now and never stored: print it or write it down. \
            With --passphrase-copy, a copy of the recovery key is also kept in the vault as recovery.age, \
            encrypted with a passphrase read from $SEMPERE_PASSPHRASE or the first line of standard input.
            """)

    @Argument(help: "The folder to hold the vault (for example inside a synced folder).") var folder: String
    @Option(name: .long("name"), help: "This device's name, as the device list shows it.") var name: String
    @Flag(name: .long("post-quantum"), help: "Use post-quantum (X-Wing) keys for the vault and this device.")
    var postQuantum: Bool
    @Flag(name: .long("passphrase-copy"), help: "Keep a passphrase-encrypted copy of the recovery key in the vault.")
    var passphraseCopy: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func validate() throws {
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--name is empty") }
    }

    func run() async throws {
        try reporting {
            let device = try Device(config: config)
            let path = absolutePath(folder)
            let folder = VaultFolder(url: URL(fileURLWithPath: path))
            if FileManager.default.fileExists(atPath: folder.url.appendingPathComponent(VaultFolder.vaultFile).path) {
                throw failure(
                    "\(path) already holds a vault: join it with `sempere join \(path) --name \(name)` instead")
            }
            let keys =
                try DeviceKeys.load(from: device.store)
                ?? {
                    let keys = DeviceKeys.generate(postQuantum: postQuantum)
                    try keys.save(to: device.store)
                    return keys
                }()
            if postQuantum && !keys.identity.isPostQuantum {
                throw failure(
                    "this device's keys are classical (X25519), made once for another vault; a post-quantum vault "
                        + "needs a device with post-quantum keys: use another --config for it")
            }
            var passphrase: String?
            if passphraseCopy {
                passphrase =
                    ProcessInfo.processInfo.environment["SEMPERE_PASSPHRASE"]
                    ?? readStandardInput().split(separator: "\n", omittingEmptySubsequences: false).first.map(
                        String.init)
                guard let given = passphrase, !given.isEmpty else {
                    throw failure("--passphrase-copy needs a passphrase in $SEMPERE_PASSPHRASE or on standard input")
                }
            }
            try folder.create()
            let created = try VaultHome.createVault(homeName: name, credentials: keys, postQuantum: postQuantum)
            try folder.write(created.vault)
            if let passphrase {
                try folder.writeRecoveryCopy(
                    try created.kit.passphraseCopy(passphrase: passphrase, postQuantum: postQuantum))
            }
            try DeviceState(folder: path, pin: created.pin).save(root: device.root)
            let secret = created.kit.secretString
            if json {
                try printJSON([
                    "vault_id": created.pin.vaultID, "folder": path, "device_id": keys.id, "device_name": name,
                    "recovery_kit": secret, "passphrase_copy": passphrase != nil,
                ])
                return
            }
            streams.out("Created the vault \(created.pin.vaultID) in \(path).")
            streams.out("This device, \(name) (\(keys.id.prefix(8))), is its home: it manages devices.")
            streams.out("")
            streams.out("RECOVERY KIT for vault \(created.pin.vaultID)")
            streams.out("")
            streams.out("    \(secret)")
            streams.out("")
            streams.out(terminalQR(Data(secret.utf8)))
            streams.out(
                "Print this page or write the kit down now, and keep it as safe as your notes: it is shown only "
                    + "once and stored nowhere. With it you can take over the vault if this device is lost; "
                    + "whoever holds it and your files can read everything.")
            if passphrase != nil {
                streams.out("A passphrase copy of the recovery key is in \(path)/recovery.age.")
            }
            streams.out("")
            streams.out("Next: `sempere new <title>` writes a note; `sempere join \(path) --name <device>` on another")
            streams.out("device asks to join, and `sempere devices approve --words \"...\"` here approves it.")
        }
    }
}

// MARK: - kit

struct Kit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kit", abstract: "The recovery kit: print it again from its passphrase copy.",
        subcommands: [KitPrint.self])
}

struct KitPrint: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "print",
        abstract: "Print the recovery kit again, from the passphrase copy in the vault (recovery.age).",
        discussion: """
            The kit itself is stored nowhere: `sempere create` shows it once. If the vault has a passphrase copy \
            (`create --passphrase-copy`), this opens it with the passphrase from $SEMPERE_PASSPHRASE or the first \
            line of standard input and prints the kit again; --html writes a printable page (print it, then \
            delete the file).
            """)

    @OptionalOption(name: .long("html"), help: "Also write the printable kit page to this file (0600).")
    var html: String?
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let copy = open.folder.url.appendingPathComponent(VaultFolder.recoveryFile)
            guard let file = FileManager.default.contents(atPath: copy.path) else {
                throw failure(
                    "this vault has no passphrase copy of the recovery key (recovery.age): the kit exists only on "
                        + "the paper printed at `sempere create`")
            }
            let passphrase =
                ProcessInfo.processInfo.environment["SEMPERE_PASSPHRASE"]
                ?? readStandardInput().split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
            guard let passphrase, !passphrase.isEmpty else {
                throw failure("the passphrase copy needs its passphrase in $SEMPERE_PASSPHRASE or on standard input")
            }
            let kit = try RecoveryKit(passphraseCopy: file, passphrase: passphrase, vaultID: open.body.vaultID)
            if let html {
                let url = URL(fileURLWithPath: absolutePath(html))
                guard
                    FileManager.default.createFile(
                        atPath: url.path, contents: Data(try kit.page().utf8), attributes: [.posixPermissions: 0o600])
                else { throw failure("cannot write \(url.path)") }
                streams.err("sempere: wrote the kit page to \(url.path): print it, then delete the file")
            }
            streams.out("RECOVERY KIT for vault \(open.body.vaultID)")
            streams.out("")
            streams.out("    \(kit.secretString)")
            streams.out("")
            streams.out(terminalQR(Data(kit.secretString.utf8)))
        }
    }
}

// MARK: - join

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join a vault: ask with --name, then finish with the six words home shows.",
        discussion: """
            Step 1, on the new device: `sempere join <folder> --name <device>` writes a join request and shows \
            six words. Step 2, on home: `sempere devices approve --words "<those words>"` shows six words of \
            its own. Step 3, on the new device: `sempere join <folder> --words "<home's words>"`. The words \
            prove that both devices see the same request and the same vault.
            """)

    @Argument(help: "The vault folder, as synced to this device.") var folder: String
    @OptionalOption(name: .long("name"), help: "Step 1: this device's name; writes the join request.")
    var name: String?
    @OptionalOption(name: .long("words"), help: "Step 3: the six words the home device shows.") var words: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func validate() throws {
        if (name == nil) == (words == nil) {
            throw ValidationError("give --name <device> to ask to join, or --words \"<home's six words>\" to finish")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name is empty") }
    }

    func run() async throws {
        try reporting {
            let device = try Device(config: config)
            let path = absolutePath(folder)
            let folder = VaultFolder(url: URL(fileURLWithPath: path))
            let unverified = try folder.unverifiedVault()
            if let name {
                try ask(device: device, folder: folder, name: name, postQuantum: unverified.body.postQuantum)
            } else if let words {
                try finish(device: device, folder: folder, path: path, words: words, vault: unverified)
            }
        }
    }

    func ask(device: Device, folder: VaultFolder, name: String, postQuantum: Bool) throws {
        let keys = try DeviceKeys.loadOrCreate(in: device.store, postQuantum: postQuantum)
        if postQuantum && !keys.identity.isPostQuantum {
            throw failure(
                "this vault is post-quantum but this device's keys are classical: join from another --config")
        }
        let request = try JoinRequest(name: name, credentials: keys)
        try folder.write(request)
        if json {
            try printJSON([
                "request_id": request.body.requestID, "device_id": keys.id, "words": request.words.description,
            ])
            return
        }
        streams.out("Asked to join as \(name) (\(keys.id.prefix(8))). On the home device, type these six words:")
        streams.out("")
        streams.out("    \(request.words)")
        streams.out("")
        streams.out(terminalQR(request.digest))
        streams.out("    sempere devices approve --words \"\(request.words)\"")
        streams.out("")
        streams.out("Home then shows six words of its own; type them here:")
        streams.out("    sempere join \(folder.url.path) --words \"<home's six words>\"")
    }

    func finish(device: Device, folder: VaultFolder, path: String, words: String, vault: SignedVault) throws {
        let keys = try device.keys()
        let mine = try folder.requests().filter {
            $0.body.signingKey == keys.signingKey.publicKey.rawRepresentation
        }
        guard !mine.isEmpty else {
            throw failure(
                "this device has no join request in \(path): run `sempere join \(path) --name <device>` first")
        }
        var lastError: SempereError?
        for request in mine {
            do {
                let pin = try JoinApproval.accept(typedWords: words, vault: vault, request: request, credentials: keys)
                try DeviceState(folder: path, pin: pin).save(root: device.root)
                for done in mine { try? folder.removeRequest(done) }
                let home = vault.body.device(vault.body.home)?.name ?? vault.body.home
                if json {
                    try printJSON(["vault_id": pin.vaultID, "device_id": keys.id, "home": home, "folder": path])
                } else {
                    streams.out("Joined the vault \(pin.vaultID) in \(path); \(home) manages its devices.")
                    streams.out("Next: `sempere ls` lists the notes, `sempere new <title>` writes one.")
                }
                return
            } catch let error as SempereError {
                // The words name one request; a typo in the words is the same for every request.
                if [.unknownWord, .ambiguousWord, .wrongWordCount].contains(error.code) { throw error }
                if lastError == nil || error.code == .notFound { lastError = error }
            }
        }
        throw lastError!
    }
}

// MARK: - devices

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the vault's devices; on home, approve, remove and rename them.",
        subcommands: [DevicesList.self, DevicesApprove.self, DevicesRemove.self, DevicesRename.self])
}

struct DevicesList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the devices of the vault, and which one manages them.")

    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let body = open.body
            if json {
                try printJSON([
                    "vault_id": body.vaultID, "generation": body.generation,
                    "devices": body.devices.map { device in
                        [
                            "id": device.id, "name": device.name, "home": device.id == body.home,
                            "this_device": device.id == open.keys.id, "added_in": device.addedIn,
                        ] as [String: Any]
                    },
                    "removed": body.removed.map {
                        ["id": $0.device.id, "name": $0.device.name, "removed_in": $0.removedIn]
                    },
                ])
                return
            }
            for device in body.devices {
                var notes: [String] = []
                if device.id == body.home { notes.append("Manages devices") }
                if device.id == open.keys.id { notes.append("this device") }
                let name = device.name.padding(toLength: max(device.name.count, 16), withPad: " ", startingAt: 0)
                streams.out("\(name)  \(device.id.prefix(8))  \(notes.joined(separator: ", "))")
            }
        }
    }
}

struct DevicesApprove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "On home: approve the device whose join request shows these six words, and show home's words.")

    @Option(name: .long("words"), help: "The six words the new device shows.") var words: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let request = try JoinRequest.matching(words: words, in: try open.folder.requests())
            let (updated, homeWords) = try JoinApproval.approve(
                request, typedWords: words, vault: open.vault, home: VaultHome(credentials: open.keys))
            try open.publish(updated)
            let id = updated.body.devices.last?.id ?? ""
            if json {
                try printJSON(["device_id": id, "name": request.body.name, "words": homeWords.description])
                return
            }
            streams.out("Approved \(request.body.name) (\(id.prefix(8))). On \(request.body.name), type:")
            streams.out("")
            streams.out("    \(homeWords)")
            streams.out("")
            streams.out("    sempere join \(open.folder.url.path) --words \"\(homeWords)\"")
        }
    }
}

struct DevicesRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "On home: remove a device; notes written from now on use a key it never gets.")

    @Argument(help: "The device's name or the start of its id.") var device: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let target = try open.device(matching: device)
            let updated = try VaultHome(credentials: open.keys).remove(
                deviceID: target.id, from: open.vault, existingNotes: try open.folder.noteReferences())
            try open.publish(updated)
            if json {
                try printJSON(["device_id": target.id, "name": target.name, "epoch": updated.body.currentEpoch.number])
                return
            }
            streams.out(
                "Removed \(target.name) (\(target.id.prefix(8))). New notes use epoch "
                    + "\(updated.body.currentEpoch.number)'s key, which \(target.name) never gets; its old notes "
                    + "stay readable.")
        }
    }
}

struct DevicesRename: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "On home: rename a device.")

    @Argument(help: "The device's name or the start of its id.") var device: String
    @Argument(help: "The new name.") var newName: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func validate() throws {
        guard !newName.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ValidationError("the new name is empty")
        }
    }

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let target = try open.device(matching: device)
            try open.publish(
                try VaultHome(credentials: open.keys).rename(deviceID: target.id, to: newName, in: open.vault))
            if json {
                try printJSON(["device_id": target.id, "name": newName])
                return
            }
            streams.out("Renamed \(target.name) (\(target.id.prefix(8))) to \(newName).")
        }
    }
}

// MARK: - notes

struct New: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new", abstract: "Write a note: the title, then Markdown from --text or standard input.")

    @Argument(help: "The note's title (its first line).") var title: String
    @OptionalOption(name: .long("text"), help: "The note's Markdown (else read from standard input).")
    var text: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            if text == nil && isatty(STDIN_FILENO) == 1 {
                streams.err("Type the note's Markdown, then Ctrl-D on a line of its own.")
            }
            let content = text ?? readStandardInput()
            var markdown = "# \(title)\n" + (content.isEmpty ? "" : "\n" + content)
            if !markdown.hasSuffix("\n") { markdown += "\n" }
            let path = try open.write(markdown)
            if json {
                try printJSON(["id": noteID(path), "path": path, "title": title])
                return
            }
            streams.out(noteID(path))
        }
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the notes: title, id, author, date; and what is set aside, with the reason.")

    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let entries = try open.entries()
            let notes = entries.filter { if case .success = $0.result { return true } else { return false } }
                .sorted { ($0.modified ?? .distantPast) > ($1.modified ?? .distantPast) }
            var setAside: [(path: String, reason: String)] = entries.compactMap { entry in
                guard case .failure(let error) = entry.result else { return nil }
                return (entry.path, error.reason)
            }
            setAside += try open.folder.setAside().map {
                ($0, "not part of the vault layout (a sync conflict copy or a stray file): never read, never deleted")
            }
            if json {
                try printJSON([
                    "notes": notes.map { entry in
                        [
                            "id": entry.id, "path": entry.path, "title": entry.title, "author": entry.author,
                            "author_name": open.name(of: entry.author), "modified": isoDate(entry.modified),
                            "mine": entry.author == open.keys.id,
                        ] as [String: Any]
                    },
                    "set_aside": setAside.map { ["path": $0.path, "reason": $0.reason] },
                ])
                return
            }
            if notes.isEmpty { streams.out("No notes yet: `sempere new <title>` writes one.") }
            for entry in notes {
                streams.out(
                    "\(entry.id.prefix(8))  \(isoDate(entry.modified))  \(open.name(of: entry.author))  \(entry.title)")
            }
            if !setAside.isEmpty {
                streams.out("")
                streams.out("Set aside (never shown as notes, never deleted):")
                for item in setAside { streams.out("  \(item.path): \(item.reason)") }
            }
        }
    }
}

struct Cat: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cat", abstract: "Print a note's Markdown.")

    @Argument(help: "The note's id, or the start of it.") var id: String
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let note = try open.open(try open.notePath(matching: id))
            FileHandle.standardOutput.write(Data(note.markdown.utf8))
            if !note.markdown.hasSuffix("\n") { streams.out("") }
        }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete one of this device's own notes.")

    @Argument(help: "The note's id, or the start of it.") var id: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let path = try open.notePath(matching: id)
            // Only a note that opens and is signed by this device is removed. A set-aside one is kept ("never
            // deleted unless you say so", and only through Repair): removing it here could lose another
            // device's note that the provider moved into this folder.
            let opened: VaultNote.Opened
            do {
                opened = try open.open(path)
            } catch let error as SempereError {
                throw failure(
                    "note \(noteID(path).prefix(8)) is set aside and is kept, not removed: \(error.reason). Repair "
                        + "will say what to do with it")
            }
            guard opened.author == open.keys.id else {
                throw failure(
                    "note \(noteID(path).prefix(8)) was written by \(open.name(of: opened.author)); only its author "
                        + "removes it (each device writes only its own notes)")
            }
            try open.folder.removeNote(at: path)
            if json {
                try printJSON(["id": noteID(path), "removed": true])
                return
            }
            streams.out("Removed note \(noteID(path)).")
        }
    }
}

struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Find notes whose text contains the words (case-insensitive).")

    @Argument(help: "The text to look for.") var text: String
    @Flag(name: .long("json"), help: "Print the matches as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            var matches: [(entry: OpenVault.Entry, lines: [String])] = []
            for entry in try open.entries() {
                guard case .success(let note) = entry.result else { continue }
                let lines = note.markdown.split(separator: "\n").map(String.init).filter {
                    $0.range(of: text, options: .caseInsensitive) != nil
                }
                if !lines.isEmpty { matches.append((entry, lines)) }
            }
            if json {
                try printJSON(matches.map { ["id": $0.entry.id, "title": $0.entry.title, "lines": $0.lines] })
                return
            }
            if matches.isEmpty { throw failure("no note contains \"\(text)\"") }
            for match in matches {
                streams.out("\(match.entry.id.prefix(8))  \(match.entry.title)")
                for line in match.lines { streams.out("    \(line)") }
            }
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Import Markdown files as notes, one note each.")

    @Arguments(help: "The Markdown files.") var files: [String]
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            var imported: [[String: String]] = []
            let progress = ProgressBar(total: files.count, label: "importing")
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw failure("cannot read \(file); \(imported.count) file(s) were imported before it")
                }
                let path = try open.write(String(decoding: data, as: UTF8.self))
                imported.append(["file": file, "id": noteID(path)])
                progress.advance()
            }
            progress.finish()
            if json { return try printJSON(imported) }
            for item in imported { streams.out("\(item["id"]!)  \(item["file"]!)") }
        }
    }
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every note as a decrypted Markdown file into a folder (plaintext: keep it private).")

    @Argument(help: "The folder to write into (created 0700 if missing).") var directory: String
    @Flag(
        name: .long("unsynced"),
        help: "On a device that was removed: save its own notes that the vault did not record.")
    var unsynced: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let target = URL(fileURLWithPath: absolutePath(directory))
            try FileManager.default.createDirectory(
                at: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var written: [[String: String]] = []
            if unsynced {
                for note in try VaultNote.unsynced(folder: open.folder, vault: open.body, credentials: open.keys) {
                    let id = note.path.split(separator: "/")[2].dropLast(4)
                    let file = target.appendingPathComponent("unsynced-\(id.prefix(8)).md")
                    guard
                        FileManager.default.createFile(
                            atPath: file.path, contents: Data(note.markdown.utf8),
                            attributes: [.posixPermissions: 0o600])
                    else { throw failure("cannot write \(file.path)") }
                    written.append(["id": String(id), "file": file.path])
                }
                if json { return try printJSON(written) }
                for item in written { streams.out(item["file"]!) }
                return
            }
            for entry in try open.entries() {
                guard case .success(let note) = entry.result else {
                    streams.err("sempere: warning: \(entry.path) is set aside and not exported")
                    continue
                }
                let safe = String(entry.title.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" }.prefix(60))
                let file = target.appendingPathComponent("\(safe)-\(entry.id.prefix(8)).md")
                guard
                    FileManager.default.createFile(
                        atPath: file.path, contents: Data(note.markdown.utf8), attributes: [.posixPermissions: 0o600])
                else { throw failure("cannot write \(file.path)") }
                written.append(["id": entry.id, "file": file.path])
            }
            streams.err(
                "sempere: warning: the \(written.count) files in \(target.path) are plaintext, readable by anyone "
                    + "who can read that folder; do not put it in a synced folder, and delete it when done")
            if json {
                try printJSON(written)
                return
            }
            for item in written { streams.out(item["file"]!) }
        }
    }
}

struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Edit one of this device's notes in $EDITOR, through a private temporary file.",
        discussion: """
            The note is decrypted into a file of mode 0600 in a new directory of mode 0700, $VISUAL or $EDITOR \
            (else vi) edits it, the result is encrypted back, and the file and its directory are deleted \
            whatever happens.
            """)

    @Argument(help: "The note's id, or the start of it.") var id: String
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?

    func run() async throws {
        try reporting {
            let open = try OpenVault(config: config, vault: vault)
            let path = try open.notePath(matching: id)
            let author = String(path.split(separator: "/")[1])
            guard author == open.keys.id else {
                throw failure(
                    "note \(noteID(path).prefix(8)) was written by \(open.name(of: author)); each device edits only "
                        + "its own notes: `sempere cat \(noteID(path).prefix(8)) | sempere new <title>` makes a copy")
            }
            let note = try open.open(path)
            let edited = try editInPrivateFile(note.markdown)
            guard edited != note.markdown else {
                streams.out("No change to note \(noteID(path)).")
                return
            }
            try open.write(edited, at: path)
            streams.out("Saved note \(noteID(path)).")
        }
    }

    /// Runs the editor on `text` in a 0600 file inside a fresh 0700 directory; both are removed on return.
    func editInPrivateFile(_ text: String) throws -> String {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/sempere-edit-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw failure("cannot create a private temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o700)
        let file = directory + "/note.md"
        let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot create \(file): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        defer { unlink(file) }
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()

        let environment = ProcessInfo.processInfo.environment
        let editor = [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(editor) \"$1\"", "sh", file]
        try process.runWithSignalsUnblocked()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw failure(
                "the editor (\(editor)) exited with status \(process.terminationStatus); the note is unchanged")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw failure("the edited file is gone (\(file)); the note is unchanged")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

await SempereCommand.main()
