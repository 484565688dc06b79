import CommandLineKit
import Foundation
import Sempere

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join a vault: ask with --name, then finish with the six words (or the code) home shows.",
        discussion: """
            Step 1, on the new device: `sempere join <folder> --name <device>` writes a join request and shows \
            six words, valid for 10 minutes, and a code (as text and a QR code). Step 2, on home: `sempere \
            devices approve` asks for those words (or give `--code <the code>`) and shows six words and a code \
            of its own. Step 3, on the new device: `sempere join <folder> --finish` asks for home's words on the \
            terminal, echo off (or give `--words "<home's words>"` or `--code`). The \
            words prove that both devices see the same request and the same vault; the codes carry the full \
            256 bits. Once the words have expired, ask again: home can approve the new request.
            """)

    @Argument(help: "The vault folder, as synced to this device.") var folder: String
    @OptionalOption(name: .long("name"), help: "Step 1: this device's name; writes the join request.")
    var name: String?
    @OptionalOption(name: .long("words"), help: "Step 3: the six words the home device shows.") var words: String?
    @OptionalOption(name: .long("code"), help: "Step 3: the code the home device shows (instead of the words).")
    var code: String?
    @Flag(name: .long("finish"), help: "Step 3: ask for the six words home shows on the terminal, echo off.")
    var finish: Bool
    @Flag(
        name: .long("protect-keys"),
        help: "Step 1: protect this device's new keys with a passphrase (asked twice; then asked by every command).")
    var protectKeys: Bool
    @OptionalOption(
        name: .long("unwrap-key-plugin"),
        help: "Step 1: keep this device's unwrap key in an age plugin (a YubiKey, a TPM): the identity file it wrote.")
    var unwrapKeyPlugin: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: ConfigOption
    @OptionGroup var secret: SecretOptions

    func validate() throws {
        if [name, words, code].compactMap({ $0 }).count + (finish ? 1 : 0) != 1 {
            throw ValidationError(
                "give --name <device> to ask to join, or --finish (or --words \"<home's six words>\", or --code) to "
                    + "finish")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name is empty") }
        if protectKeys && name == nil {
            throw ValidationError("--protect-keys goes with --name (step 1), where this device makes its keys")
        }
        if unwrapKeyPlugin != nil && name == nil {
            throw ValidationError("--unwrap-key-plugin goes with --name (step 1), where this device makes its keys")
        }
    }

    func run() async throws {
        try reporting {
            let path = absolutePath(folder)
            let url = URL(fileURLWithPath: path)
            let root = try options.configRoot()
            if name != nil {
                try options.protectNewKeys(protectKeys)
                try options.keepUnwrapKey(inPlugin: unwrapKeyPlugin)
            }
            if let name {
                if let aside = try VaultSession.keepAsideIfRemoved(folder: url, configRoot: root) {
                    streams.err(
                        "This device had been removed from the vault. Its old key and state are kept in "
                            + "\(aside.path) (`sempere export --unsynced <folder> --config \(aside.path)` still saves "
                            + "what it had not synced); it asks to join again with a fresh key.")
                }
                let request = try VaultSession.askToJoin(folder: url, name: name, configRoot: root)
                show(request, name: name, path: path)
                return
            }
            let check: JoinCheck =
                if let code { .code(code) } else {
                    .words(try words ?? secret.read("the six words the home device shows"))
                }
            let session = try VaultSession.finishJoin(folder: url, check: check, configRoot: root)
            let home = session.name(of: session.body.home)
            if json {
                try printJSON([
                    "vault_id": session.body.vaultID, "device_id": session.keys.id, "home": home, "folder": path,
                ])
                return
            }
            streams.out("Joined the vault \(session.body.vaultID) in \(path); \(home) manages its devices.")
            streams.out("Next: `sempere ls` lists the notes, `sempere new <title>` writes one.")
        }
    }

    func show(_ request: JoinRequest, name: String, path: String) {
        let expires = isoDate(request.expiresAt)
        if json {
            try? printJSON([
                "request_id": request.body.requestID, "device_id": request.deviceID, "words": request.words.description,
                "code": request.code, "expires": expires,
            ])
            return
        }
        streams.out(
            "Asked to join as \(name) (\(request.deviceID.prefix(8))). On the home device, type these six words (valid until \(expires)):"
        )
        streams.out("")
        streams.out("    \(request.words)")
        streams.out("")
        streams.out("    sempere devices approve      (it asks for the words)")
        streams.out("")
        streams.out("Or scan or paste this code there, which carries the full 256 bits:")
        streams.out("")
        streams.out(terminalQR(Data(request.code.utf8)))
        streams.out("    sempere devices approve --code \(request.code)")
        streams.out("")
        streams.out("Home then shows six words of its own; type them here:")
        streams.out("    sempere join \(path) --words \"<home's six words>\"")
    }
}
