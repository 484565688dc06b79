import CommandLineKit
import Foundation
import PixieDevice

/// `pixie backup`: the store as a `.pixie-archive` file, sealed under this device's BackupKey, without secrets.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup", abstract: "Export the store to a .pixie-archive, or import one.",
        discussion: """
            The archive holds every row but provider API keys, sealed under this device's BackupKey. Another device \
            opens it only with that key: carry it there with `pixie backup-key export` and `import`.
            """,
        subcommands: [BackupExport.self, BackupImport.self])
}

struct BackupExport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Write the store to a new .pixie-archive file.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The archive to write (never over an existing file).") var file: String

    func run() async throws {
        try await reporting {
            let home = try openHome(home)
            let summary = try BackupService(store: try openStore(home.directory.path)).exportArchive(
                to: URL(fileURLWithPath: file), keyring: BackupKeyring(home: home))
            streams.out(
                "Wrote \(file): \(summary.rows) rows, \(summary.bytes) bytes, sealed under BackupKey \(summary.keyID) "
                    + "(provider API keys are never in an archive).")
        }
    }
}

struct BackupImport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Import a .pixie-archive: rows this device has already are kept.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The archive to read.") var file: String

    func run() async throws {
        try await reporting {
            let home = try openHome(home)
            let summary = try BackupService(store: try openStore(home.directory.path)).importArchive(
                from: URL(fileURLWithPath: file), keyring: BackupKeyring(home: home))
            streams.out("Imported \(file): \(summary.rows) rows, \(summary.inserted) new here.")
        }
    }
}

/// `pixie backup-key`: move the BackupKey as a file, since Linux has no iCloud Keychain to carry it.
struct BackupKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup-key", abstract: "Carry this device's BackupKey to another device, as a file.",
        subcommands: [BackupKeyExport.self, BackupKeyImport.self])
}

struct BackupKeyExport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Write this device's BackupKey to a new file (mode 0600).")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The file to write; whoever holds it can open this device's archives.") var file: String

    func run() async throws {
        try await reporting {
            let key = try BackupKeyring(home: try openHome(home)).exportKey(to: URL(fileURLWithPath: file))
            streams.out("Wrote BackupKey \(key.id) to \(file). Keep it as secret as the archives it opens.")
        }
    }
}

struct BackupKeyImport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Add a BackupKey from a file another device wrote.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The key file (`pixie backup-key export` wrote it).") var file: String

    func run() async throws {
        try await reporting {
            let (key, added) = try BackupKeyring(home: try openHome(home)).importKey(from: URL(fileURLWithPath: file))
            streams.out(
                added
                    ? "Added BackupKey \(key.id): archives sealed under it open here now."
                    : "This device holds BackupKey \(key.id) already.")
        }
    }
}
