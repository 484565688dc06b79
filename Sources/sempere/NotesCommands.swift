import CommandLineKit
import Foundation
import Processes
import Sempere

#if canImport(Glibc)
    import Glibc
#endif

struct New: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new", abstract: "Write a note: the title, then Markdown from --text or standard input.")

    @Argument(help: "The note's title (its first line).") var title: String
    @OptionalOption(name: .long("text"), help: "The note's Markdown (else read from standard input).")
    var text: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            if text == nil && isatty(STDIN_FILENO) == 1 {
                streams.err("Type the note's Markdown, then Ctrl-D on a line of its own.")
            }
            let content = text ?? readStandardInput()
            var markdown = "# \(title)\n" + (content.isEmpty ? "" : "\n" + content)
            if !markdown.hasSuffix("\n") { markdown += "\n" }
            let path = try session.newNote(markdown: markdown)
            let id = VaultSession.noteID(path)
            if json {
                try printJSON(["id": id, "path": path, "title": title])
                return
            }
            streams.out(id)
        }
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the notes: title, id, author, date; and what is set aside, with the reason.")

    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let listing = try session.list(withText: false)
            for warning in listing.warnings { streams.err("sempere: warning: \(printable(warning))") }
            if json {
                try printJSON([
                    "notes": listing.notes.map { note in
                        [
                            "id": note.id, "path": note.path, "title": note.title, "author": note.author,
                            "author_name": session.name(of: note.author), "modified": isoDate(note.modified),
                            "mine": note.author == session.keys.id, "version": note.version,
                            "conflict_with": note.otherVersions,
                        ] as [String: Any]
                    },
                    "pending": listing.pending.map { pending in
                        [
                            "id": pending.id, "path": pending.path, "author": pending.author,
                            "version": pending.version ?? NSNull(), "expected": pending.expected ?? NSNull(),
                            "reason": pending.reason,
                        ] as [String: Any]
                    },
                    "set_aside": listing.setAside.map {
                        ["path": $0.path, "category": $0.category.identifier, "reason": $0.reason]
                    },
                    "waiting_for_removal": listing.waitingForRemoval,
                ])
                return
            }
            if listing.notes.isEmpty { streams.out("No notes yet: `sempere new <title>` writes one.") }
            // One line a note; a note in conflict once, naming the devices of its versions.
            var listed = Set<String>()
            for note in listing.notes where listed.insert(note.id).inserted {
                let versions = listing.notes.filter { $0.id == note.id }
                let names = versions.map { printable(session.name(of: $0.author)) }
                let conflict =
                    versions.count > 1
                    ? "  [conflict: \(versions.count) versions, from \(names.joined(separator: " and ")): `sempere cat` "
                        + "shows them]" : ""
                streams.out(
                    "\(note.id.prefix(8))  \(isoDate(note.modified))  \(names[0])  \(printable(note.title))\(conflict)")
            }
            if !listing.pending.isEmpty {
                streams.out("")
                streams.out("Pending (on their way: shown once they arrive):")
                for item in listing.pending {
                    streams.out(
                        "  \(item.id.prefix(8))  \(printable(session.name(of: item.author))): \(printable(item.reason))"
                    )
                }
            }
            if !listing.setAside.isEmpty {
                streams.out("")
                streams.out("Set aside (never shown as notes, never deleted; `sempere repair` restores or deletes):")
                for category in SetAsideCategory.all {
                    let items = listing.setAside.filter { $0.category == category }
                    guard !items.isEmpty else { continue }
                    streams.out("  \(category.title):")
                    for item in items { streams.out("    \(printable(item.path)): \(printable(item.reason))") }
                }
            }
        }
    }
}

struct Cat: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cat", abstract: "Print a note's Markdown.")

    @Argument(help: "The note's id, or the start of it.") var id: String
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let draft = try session.draft(of: try session.notePath(matching: id))
            if draft.versions.count > 1 {
                streams.err(
                    "sempere: note \(draft.id.prefix(8)) has \(draft.versions.count) versions, written on devices that "
                        + "had not seen each other's; each is shown below. `sempere edit \(draft.id.prefix(8))` merges "
                        + "them, `sempere resolve \(draft.id.prefix(8)) --keep <device>` keeps one.")
            }
            FileHandle.standardOutput.write(Data(draft.markdown.utf8))
            if !draft.markdown.hasSuffix("\n") { streams.out("") }
        }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Delete a note, on every device (never a set-aside one); kept 30 days in the trash.")

    @Argument(help: "The note's id, or the start of it.") var id: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let path = try session.notePath(matching: id)
            try session.removeNote(at: path)
            let id = VaultSession.noteID(path)
            if json {
                try printJSON(["id": id, "removed": true])
                return
            }
            streams.out(
                "Removed note \(id.prefix(8)); it stays in this device's trash for \(VaultSession.trashDays) days: "
                    + "`sempere trash restore \(id.prefix(8))` brings it back.")
        }
    }
}

/// `sempere trash`: the notes this device removed, restorable for 30 days.
struct Trash: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash",
        abstract: "List the notes this device removed in the last 30 days, or restore one.",
        discussion: """
            `sempere rm` keeps each note it removes in this device's trash, encrypted to this device's own key \
            and never in the synced folder, for 30 days; then the deletion is final.
            """,
        subcommands: [TrashList.self, TrashRestore.self], defaultSubcommand: TrashList.self)
}

struct TrashList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the trash, newest first.")

    @Flag(name: .long("json"), help: "Print the trash as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let entries = try options.session().trash()
            if json {
                try printJSON(
                    entries.map {
                        [
                            "id": $0.id, "path": $0.path, "title": $0.title, "deleted": isoDate($0.deletedAt),
                            "expires": isoDate($0.expiresAt),
                        ]
                    })
                return
            }
            guard !entries.isEmpty else {
                streams.out("The trash is empty.")
                return
            }
            for entry in entries {
                streams.out(
                    "\(entry.id.prefix(8))  \(printable(entry.title))  removed \(isoDate(entry.deletedAt)), kept until "
                        + isoDate(entry.expiresAt))
            }
        }
    }
}

struct TrashRestore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Bring a note back from the trash, as it was when removed.")

    @Argument(help: "The note's id, or the start of it.") var id: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let path = try options.session().restoreFromTrash(id)
            let restored = VaultSession.noteID(path)
            if json {
                try printJSON(["id": restored, "restored": true])
                return
            }
            streams.out("Restored note \(restored.prefix(8)).")
        }
    }
}

struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find the notes that hold every word (anywhere in the note, ignoring case and accents).",
        discussion: """
            Each note found is shown with its title and the lines that hold a word, with a line of context either \
            side. `sempere search milk "eggs bread"` finds notes holding all three words.
            """)

    @Arguments(help: "The words to look for.") var words: [String]
    @Flag(name: .long("json"), help: "Print the matches as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let query = words.joined(separator: " ")
            let matches = try session.search(query)
            if json {
                try printJSON(
                    matches.map { match in
                        [
                            "id": match.id, "title": match.title,
                            "excerpts": match.excerpts.map { run in
                                run.map { ["line": $0.line, "text": $0.text, "match": $0.matches] as [String: Any] }
                            },
                        ] as [String: Any]
                    })
                return
            }
            if matches.isEmpty { throw failure("no note holds every word of \"\(query)\"") }
            for match in matches {
                streams.out("\(match.id.prefix(8))  \(printable(match.title))")
                for (index, run) in match.excerpts.enumerated() {
                    if index > 0 { streams.out("    …") }
                    for line in run {
                        streams.out("  \(line.matches ? ">" : " ") \(line.line): \(printable(line.text))")
                    }
                }
            }
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import Markdown files as notes, one note each (UTF-8 only; all are checked first).")

    @Arguments(help: "The Markdown files.") var files: [String]
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let paths = try session.importNotes(files.map { URL(fileURLWithPath: absolutePath($0)) })
            let imported = zip(files, paths).map { ["file": $0, "id": VaultSession.noteID($1)] }
            if json { return try printJSON(imported) }
            for item in imported { streams.out("\(item["id"]!)  \(item["file"]!)") }
        }
    }
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every note as a decrypted Markdown file into a folder (plaintext: keep it private).",
        discussion: """
            The folder is created 0700 if missing and each file is 0600. A folder inside the vault folder is \
            refused, since the provider would sync the plaintext.
            """)

    @Argument(help: "The folder to write into (created 0700 if missing).") var directory: String
    @Flag(
        name: .long("unsynced"),
        help: "On a device that was removed: save its own notes that the vault did not record.")
    var unsynced: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let target = URL(fileURLWithPath: absolutePath(directory))
            if unsynced {
                let written = try VaultSession.exportUnsynced(
                    configRoot: try options.configRoot(), folder: options.vault.map(absolutePath), to: target)
                if json { return try printJSON(written.map { ["id": $0.id, "file": $0.file.path] }) }
                for item in written { streams.out(item.file.path) }
                return
            }
            let session = try options.session()
            let (written, setAside) = try session.export(to: target)
            for item in setAside {
                streams.err("sempere: warning: \(printable(item.path)) is set aside and not exported")
            }
            streams.err(
                "sempere: warning: the \(written.count) files in \(target.path) are plaintext, readable by anyone "
                    + "who can read that folder; do not put it in a synced folder, and delete it when done")
            if json { return try printJSON(written.map { ["id": $0.id, "file": $0.file.path] }) }
            for item in written { streams.out(item.file.path) }
        }
    }
}

struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Edit a note in $EDITOR (any device edits any note), through a private temporary file.",
        discussion: """
            The note is decrypted into a file of mode 0600 in a new directory of mode 0700, $VISUAL or $EDITOR \
            (else vi) edits it, the result is encrypted back as this device's version, and the file and its \
            directory are deleted whatever happens. An edit that empties the note is not saved (as git aborts on \
            an empty message). A note in conflict opens with every version between marker lines; what you save \
            replaces them all. A version that arrives from another device while you edit is kept beside yours.
            """)

    @Argument(help: "The note's id, or the start of it.") var id: String
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let path = try session.notePath(matching: id)
            let draft = try session.draft(of: path)
            let edited = try editInPrivateFile(draft.markdown)
            let id = VaultSession.noteID(path)
            guard edited != draft.markdown else {
                streams.out(
                    draft.versions.count > 1
                        ? "No change to note \(id): its \(draft.versions.count) versions stay in conflict."
                        : "No change to note \(id).")
                return
            }
            try session.updateNote(at: path, markdown: edited, replacing: draft)
            streams.out("Saved note \(id).")
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
        do {
            try handle.write(contentsOf: Data(text.utf8))
            try handle.close()
        } catch {
            throw failure("cannot write \(file) (is \(base) full?); the note is unchanged")
        }

        let environment = ProcessInfo.processInfo.environment
        let editor = [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(editor) \"$1\"", "sh", file]
        try process.run()
        // The editor has the terminal: Ctrl-C and Ctrl-\ are its, and do not end sempere under it (as system(3)
        // does; the editor starts with every signal at its default action).
        let interrupt = signal(SIGINT, SIG_IGN)
        let quit = signal(SIGQUIT, SIG_IGN)
        process.waitUntilExit()
        signal(SIGINT, interrupt)
        signal(SIGQUIT, quit)
        guard process.terminationStatus == 0 else {
            throw failure(
                "the editor (\(editor)) exited with status \(process.terminationStatus); the note is unchanged")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw failure("the edited file is gone (\(file)); the note is unchanged")
        }
        guard let edited = String(validating: data, as: UTF8.self) else {
            throw failure("the edited file is not UTF-8 text; the note is unchanged")
        }
        return edited
    }
}

struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "End a note's conflict by keeping the version one device wrote.",
        discussion: """
            Two devices that edit one note before either has seen the other's edit leave two versions, both kept \
            and both shown by `sempere cat`. `sempere resolve <id> --keep <device>` keeps that device's text as \
            the note (written as this device's next version); `sempere edit <id>` merges them by hand instead.
            """)

    @Argument(help: "The note's id, or the start of it.") var id: String
    @Option(name: .long("keep"), help: "The device whose version to keep: its name, or the start of its id.")
    var keep: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let path = try session.notePath(matching: id)
            try session.resolveConflict(at: path, keeping: keep)
            let id = VaultSession.noteID(path)
            if json { return try printJSON(["id": id, "resolved": true]) }
            streams.out("Note \(id.prefix(8)) now holds \(printable(keep))'s version; the conflict is resolved.")
        }
    }
}
