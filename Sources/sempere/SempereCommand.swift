import Age
import CommandLineKit
import Foundation
import Sempere

#if canImport(Glibc)
    import Glibc
#endif

/// `sempere`: a notes vault on any synced folder (README.md, docs/sempere-format.md). Each command parses
/// its arguments, calls `VaultSession` in the Sempere library, and prints.
struct SempereCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sempere",
        abstract: "A notes vault on any synced folder: every note is an age file, every device has its own key.",
        discussion: """
            Start with `sempere create <folder> --name <device>` on the first device (it becomes home, which \
            manages devices), or `sempere join <folder> --name <device>` on another one. This device's keys and \
            state live in --config, else $SEMPERE_CONFIG, else $XDG_CONFIG_HOME/sempere, else ~/.config/sempere.
            """,
        version: "sempere 0.5.0",
        subcommands: [
            Create.self, Join.self, Devices.self, New.self, List.self, Cat.self, Remove.self, Search.self,
            Import.self, Export.self, Edit.self, Resolve.self, Repair.self, Kit.self, Takeover.self, Reencrypt.self,
            Alerts.self,
            Status.self, Trash.self, Keys.self,
        ])
}

/// The options every command that works on a vault takes.
struct VaultOptions: ParsableArguments {
    @OptionalOption(name: .long("vault"), help: "The vault folder (needed when this device is in several).")
    var vault: String?
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?
    @OptionalOption(
        name: .long("keys-passphrase-env"),
        help: "Read the passphrase of this device's keys from this environment variable, not the terminal (warned).")
    var keysPassphraseEnvironment: String?

    /// This device's configuration root (and how to ask for its keys' passphrase, when they have one).
    func configRoot() throws -> URL {
        KeyPassphraseSource(environmentName: keysPassphraseEnvironment).register()
        PluginRequests.register()
        return try DeviceState.configRoot(override: config, environment: ProcessInfo.processInfo.environment)
    }

    /// The vault, opened and checked against this device's pin; what opening noticed is shown as warnings.
    func session() throws -> VaultSession {
        let session = try VaultSession(configRoot: try configRoot(), folder: vault.map(absolutePath))
        for notice in session.notices { streams.err("sempere: warning: \(printable(notice))") }
        return session
    }
}

/// Only `--config` (and where the keys' passphrase comes from), for the commands that make a vault or join one.
struct ConfigOption: ParsableArguments {
    @OptionalOption(name: .long("config"), help: "This device's configuration directory.") var config: String?
    @OptionalOption(
        name: .long("keys-passphrase-env"),
        help: "Read the passphrase of this device's keys from this environment variable, not the terminal (warned).")
    var keysPassphraseEnvironment: String?

    func configRoot() throws -> URL {
        KeyPassphraseSource(environmentName: keysPassphraseEnvironment).register()
        PluginRequests.register()
        return try DeviceState.configRoot(override: config, environment: ProcessInfo.processInfo.environment)
    }

    /// With `protect`, a new passphrase for the keys this command makes (asked twice on the terminal).
    func protectNewKeys(_ protect: Bool) throws {
        guard protect else { return }
        try VaultSession.protectNewKeys(
            with: try KeyPassphraseSource(environmentName: keysPassphraseEnvironment).read(confirm: true))
    }
}

extension ConfigOption {
    /// With a file, the unwrap key of the keys this command makes is the age plugin key that identity file names
    /// (tried first: a wrap and an unwrap).
    func keepUnwrapKey(inPlugin path: String?) throws {
        guard let path else { return }
        // The plugin is tried now (a wrap and an unwrap), and may ask for its PIN.
        PluginRequests.register()
        let text: String
        do {
            text = try String(contentsOfFile: absolutePath(path), encoding: .utf8)
        } catch {
            throw failure(
                "--unwrap-key-plugin \(path): cannot read that file (\(error.localizedDescription)); give the "
                    + "identity file the plugin wrote, such as `age-plugin-yubikey --identity > key.txt`")
        }
        try VaultSession.keepNewUnwrapKey(inPlugin: text)
    }
}

/// How an age plugin holding this device's unwrap key reaches the person: its messages on standard error, its
/// PIN and other requests on the terminal, echo off.
enum PluginRequests {
    static func register() {
        VaultSession.askForPluginRequests(
            AgePluginUI(
                showMessage: { message in
                    streams.err("sempere: \(printable(message))")
                    return true
                },
                requestSecret: { message in
                    try? SecretOptions.askTerminal(
                        "\(printable(message)): ", what: "what the age plugin asks for",
                        elsewhere: "run the command on a terminal")
                },
                requestPublic: { message in
                    try? SecretOptions.askTerminal(
                        "\(printable(message)): ", what: "what the age plugin asks for",
                        elsewhere: "run the command on a terminal")
                }))
    }
}

/// Where the passphrase of this device's keys comes from: the terminal, echo off, asked once per command; or an
/// environment variable the person names with `--keys-passphrase-env`, with a warning.
struct KeyPassphraseSource {
    let environmentName: String?
    static let what = "the passphrase of this device's keys"

    func read(confirm: Bool = false) throws -> String {
        if let name = environmentName {
            guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                throw failure(
                    "--keys-passphrase-env \(name): $\(name) is not set, or empty, so there is no \(Self.what) to read")
            }
            streams.err(
                "sempere: warning: reading \(Self.what) from $\(name): every program you run can read your "
                    + "environment, and some log it; unset it once done, or let sempere ask on the terminal")
            return SecretOptions.withoutLineEnd(value)
        }
        let typed = try SecretOptions.askTerminal(
            "Passphrase of this device's keys: ", what: Self.what,
            elsewhere: "give --keys-passphrase-env NAME to read it from an environment variable")
        if confirm,
            try SecretOptions.askTerminal("The same again, to check: ", what: Self.what, elsewhere: nil) != typed
        {
            throw failure("the two entries of \(Self.what) differ; nothing was done")
        }
        return typed
    }

    /// Lets the library ask, when it opens keys that have a passphrase.
    func register() {
        let source = self
        VaultSession.askForKeyPassphrase { try source.read() }
    }
}

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
        throw failure("unexpected error (please report it): \(error.localizedDescription)")
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

/// A date as ISO 8601 in UTC (`2026-12-04T09:35:18Z`); one format style for every call (an
/// `ISO8601DateFormatter` per call cost as much as the rest of `ls` at 10,000 notes).
func isoDate(_ date: Date?) -> String { date.map { $0.formatted(isoStyle) } ?? "" }

private let isoStyle = Date.ISO8601FormatStyle()

func readStandardInput() -> String {
    String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
}

/// A QR code for the terminal, or nothing when it cannot be made (the words or string suffice).
func terminalQR(_ payload: some DataProtocol) -> String {
    (try? QRCode(payload).terminalText()) ?? ""
}

/// Whether the person agrees to `question`: `--yes` agrees; otherwise it is asked on the terminal, and a
/// command not run from a terminal is refused (a script says `--yes`).
func confirm(_ question: String, yes: Bool) throws -> Bool {
    if yes { return true }
    guard isatty(STDIN_FILENO) == 1 else {
        throw failure("\(question) Not run from a terminal, so nothing was done: add --yes to go ahead")
    }
    streams.err("\(question) [y/N] ")
    let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
    return answer == "y" || answer == "yes"
}

/// The current kit, when `--with-current-kit` was given (its secret read as `secret` says).
func currentKit(if given: Bool, for session: VaultSession, from secret: SecretOptions) throws -> RecoveryKit? {
    guard given else { return nil }
    return try RecoveryKit(
        secretString: try secret.read("the current recovery kit (SEMPERE-KIT-1...)"), vaultID: session.body.vaultID)
}

/// Prints a new recovery kit: its secret and its QR code.
func printNewKit(_ kit: RecoveryKit, vaultID: String) {
    let secret = kit.secretString
    streams.out("NEW RECOVERY KIT for vault \(vaultID)")
    streams.out("")
    streams.out("    \(secret)")
    streams.out("")
    streams.out(terminalQR(Data(secret.utf8)))
}

/// Prints the warnings a change added to the session after it was opened.
func printNotices(_ session: VaultSession, after count: Int) {
    for notice in session.notices.dropFirst(count) { streams.err("sempere: warning: \(printable(notice))") }
}

/// `text` with every control, format and separator character shown as `\u{…}`: file names and device
/// names come from the synced folder, and a newline or an escape sequence in one must not draw a line of
/// its own on the terminal.
func printable(_ text: String) -> String {
    let refused: Set<Unicode.GeneralCategory> = [.control, .format, .lineSeparator, .paragraphSeparator]
    var out = ""
    for scalar in text.unicodeScalars {
        if refused.contains(scalar.properties.generalCategory) {
            out += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// Creates `url` with `data`, mode 0600, failing if anything is there already.
func writeNewPrivateFile(_ data: Data, to url: URL) throws {
    let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
        throw failure(
            errno == EEXIST
                ? "\(url.path) exists already: nothing was written (give a new file name)"
                : "cannot create \(url.path): \(String(cString: strerror(errno)))")
    }
    let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    do {
        try handle.write(contentsOf: data)
        try handle.close()
    } catch {
        unlink(url.path)
        throw failure("cannot write \(url.path) (is the disk full?); nothing was kept")
    }
}
