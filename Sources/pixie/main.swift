import CommandLineKit
import Foundation
import PixieDevice
import PixieWire

#if canImport(Glibc)
    import CMalloc
#endif

/// `pixie`: one Pixie device, its state in `--home` (README.md, "Two devices"). Libraries do the work
/// (PixieDevice's OnboardingFlow and InboxListener); this parses arguments and prints.
struct PixieCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pixie",
        abstract:
            "One Pixie device: create an account, sign a new device in with a sibling's approval, absorb its store.",
        discussion: """
            Start with `pixie init` on the first device (it creates the account), keep it online with `pixie \
            listen`, and run `pixie signin` on a new one: it shows a check code, which the person types on the \
            listening device to approve. Each device's keys and state live in --home (mode 0700, one 0600 file).
            """,
        version: "pixie 0.1.0",
        subcommands: [
            Init.self, SignIn.self, Listen.self, Sync.self, Devices.self, Store.self, Backup.self,
            BackupKeyCommand.self,
            SignOut.self,
        ])
}

let streams = StandardStreams()

func failure(_ message: String) -> ExitCode {
    streams.err("pixie: error: \(message)")
    return .failure
}

/// Runs `body`, turning every error into a message on standard error and exit status 1.
func reporting(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
    } catch PixieClientError.refused(_, let refusal) where refusal.error == "device_removed" {
        // docs/pixie-protocol.md, "How the devices learn it": say so plainly, and what the person can still do.
        let by = refusal.removedBy.map { " by the device \"\($0)\"" } ?? " when another device replaced all others"
        let at =
            refusal.removedAt.map { " on \(DevicesList.format(Date(timeIntervalSince1970: TimeInterval($0))))" } ?? ""
        throw failure(
            "this device was removed from the account\(by)\(at). It can no longer act for the account, and the "
                + "account's keys were changed so it cannot read what comes next. What it holds stays here: save it "
                + "with `pixie backup export`, then `pixie signout` to clear this home")
    } catch {
        throw failure("\(error)")
    }
}

func printJSON(_ value: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
    streams.out(String(decoding: data, as: UTF8.self))
}

/// A line of standard input (``Lines``); nil at its end, or once the task is cancelled.
func readLineAsync() async -> String? { await Lines.standardInput.next() }

func openHome(_ path: String) throws -> DeviceHome {
    let url =
        path.hasPrefix("/")
        ? URL(fileURLWithPath: path)
        : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
    return try DeviceHome(directory: url.standardizedFileURL)
}

/// The device's world for `home`: the network checks an https:// server against the CA the home keeps
/// (`--ca-file`), or the system's trust store.
func deviceEnvironment(_ home: DeviceHome) -> DeviceEnvironment { DeviceEnvironment(tls: home.tls) }

/// The onboarding flow of the device at `home`, with ``deviceEnvironment(_:)``.
func onboardingFlow(_ home: DeviceHome) -> OnboardingFlow {
    OnboardingFlow(home: home, environment: deviceEnvironment(home))
}

/// Whether `host` (a URL's host) is this machine: `localhost`, 127.0.0.0/8 or ::1, where plain HTTP never leaves
/// it.
func isLoopback(_ host: String) -> Bool {
    let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    if bare.lowercased() == "localhost" { return true }
    var v4 = in_addr()
    if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
    var v6 = in6_addr()
    guard inet_pton(AF_INET6, bare, &v6) == 1 else { return false }
    return withUnsafeBytes(of: &v6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
}

/// Where a new device's setup starts: the server, its trust bundle, the number, and how the SMS code comes
/// (`pixie init` and `pixie signin` share these options).
struct Setup: ParsableArguments {
    @Option(name: .long("home"), help: "This device's directory (created mode 0700).") var home: String
    @Option(
        name: .long("server"),
        help: "The pixie-server: https://host[:port], or http://host:port for one on this machine.")
    var server: String
    @OptionalOption(
        name: .long("ca-file"),
        help: "Trust only the CA certificates in this PEM file for the https:// server (a private CA); kept in the "
            + "home for every later command. Default: the system's trust store.")
    var caFile: String?
    @Option(name: .long("trust-bundle"), help: "The app's trust bundle (`pixie-server trust-bundle` prints it).")
    var trustBundle: String
    @Option(name: .long("phone"), help: "This device's phone number, E.164 (+14155550123).") var phone: String
    @Option(name: .long("name"), help: "This device's name, as the device list shows it.") var name: String
    @Option(name: .long("family"), help: "This device's family, as its siblings show it (\"Approve on your …\").")
    var family: String = "Linux"
    @OptionalOption(name: .long("code"), help: "The SMS code, when it is known already.") var code: String?
    @OptionalOption(
        name: .long("sms-outbox"), help: "Development: read the code from pixie-server's sms-outbox.jsonl.")
    var smsOutbox: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @Flag(
        name: .long("insecure-plain-http"),
        help: "Allow an http:// server that is not on this machine: sessions, the phone number and relay traffic "
            + "then cross the network in the clear.")
    var insecurePlainHTTP: Bool

    func check() throws {
        guard let url = URL(string: server), url.scheme.map({ ["http", "https"].contains($0) }) == true else {
            throw ValidationError("--server must be an http:// or https:// URL, not \(server)")
        }
        if caFile != nil, url.scheme != "https" {
            throw ValidationError("--ca-file is for an https:// server; \(server) is plain HTTP")
        }
        if url.scheme == "http", !isLoopback(url.host ?? ""), !insecurePlainHTTP {
            throw ValidationError(
                "--server \(server) is plain HTTP to another machine: the session tokens, the phone number and the "
                    + "relay's traffic would cross the network unencrypted. Use the server's https:// address, or "
                    + "pass --insecure-plain-http if you mean it (a closed test network)")
        }
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--name is empty") }
        guard isDisplayableName(name) else {
            throw ValidationError(
                "--name must be 1 to 64 bytes of UTF-8 without control, line-separator or bidirectional characters")
        }
        guard isDisplayableName(family) else {
            throw ValidationError(
                "--family must be 1 to 64 bytes of UTF-8 without control, line-separator or bidirectional characters")
        }
    }

    /// The home, keeping --ca-file in it first.
    func openedHome() throws -> DeviceHome {
        let opened = try openHome(home)
        if let caFile { try opened.trustServerCA(from: caFile) }
        return opened
    }

    func bundle() throws -> TrustBundle {
        guard let data = FileManager.default.contents(atPath: trustBundle) else {
            throw failure("cannot read the trust bundle \(trustBundle); `pixie-server trust-bundle > FILE` makes one")
        }
        do {
            return try JSONDecoder().decode(TrustBundle.self, from: data)
        } catch {
            throw failure("\(trustBundle) is not a trust bundle; `pixie-server trust-bundle > FILE` makes one")
        }
    }

    /// The code: --code, the development outbox, or typed.
    func codeSource() -> OnboardingFlow.CodeSource {
        let code = code
        let outbox = smsOutbox
        let quiet = json
        return { number, length in
            if let code { return code }
            if let outbox { return try await Self.readOutbox(outbox, to: number) }
            if !quiet { streams.err("A code was sent to \(number). Type it (\(length) digits):") }
            guard let line = await readLineAsync()?.trimmingCharacters(in: .whitespaces), !line.isEmpty else {
                throw DeviceError.phoneCode("no code was typed; run the command again")
            }
            return line
        }
    }

    /// The newest code to `number` in a development outbox, waiting up to 10 s for it to be written.
    static func readOutbox(_ path: String, to number: String) async throws -> String {
        guard let code = try await DevelopmentOutbox.waitForCode(at: path, to: number) else {
            throw DeviceError.phoneCode("no code to \(number) appeared in \(path)")
        }
        return code
    }
}

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create a new account, with this as its first device.",
        discussion: "Verifies the number, creates the account and this device's passkey, and checks every binding "
            + "the server serves against the transparency log.")

    @OptionGroup var setup: Setup

    func validate() throws { try setup.check() }

    func run() async throws {
        try await reporting {
            let state = try await onboardingFlow(try setup.openedHome()).createAccount(
                server: URL(string: setup.server)!, trustBundle: try setup.bundle(), name: setup.name,
                phoneNumber: setup.phone, code: setup.codeSource(), family: setup.family)
            let membership = state.membership!
            if setup.json {
                try printJSON([
                    "account_id": membership.accountID, "device_id": membership.deviceID,
                    "kt_handle": membership.ktHandle,
                ])
                return
            }
            streams.out("Created an account for \(setup.phone); this device, \(setup.name), is its first.")
            streams.out("Run `pixie listen --home \(setup.home)` to approve new devices.")
        }
    }
}

struct SignIn: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin",
        abstract: "Sign this new device in, approved on a device already in the account, and absorb its store.",
        discussion: "Shows a check code: type it on the other device (running `pixie listen`) to approve. Waits up "
            + "to --wait seconds; no answer, or a rejection, and this device does not join. Once it has joined, it "
            + "absorbs the account's store from a sibling as `pixie sync` does (unless --no-sync): if no byte of it "
            + "has arrived after the grace, press Enter to go on while it keeps coming in the background. A store "
            + "that does not arrive leaves the device in the account, says so, and `pixie sync retry` asks again.")

    @OptionGroup var setup: Setup
    @OptionGroup var absorb: AbsorbOptions
    @Flag(name: .long("no-sync"), help: "Only join: do not absorb the store (`pixie sync` does it later).")
    var noSync: Bool
    @Option(name: .long("wait"), help: "How long to wait for an approval, in seconds (at most 300).")
    var wait: Int = 180
    @OptionalOption(
        name: .long("grant-code"),
        help: "Join with the six digits a device of the account shows (`pixie listen --grant-code` there).")
    var grantCode: String?

    func validate() throws {
        try setup.check()
        try absorb.check()
        // A sibling drops a request older than 5 minutes, so waiting longer would only spend the number's tokens.
        guard (1...300).contains(wait) else { throw ValidationError("--wait must be 1 to 300 seconds") }
        if let grantCode, grantCode.count != 6 || !grantCode.allSatisfy(\.isNumber) {
            throw ValidationError("--grant-code is the six digits the other device shows")
        }
    }

    func run() async throws {
        let json = setup.json
        try await reporting {
            var configuration = SignInApprovalRequester.Configuration(deviceModel: setup.name)
            configuration.maximumWait = .seconds(wait)
            let flow = onboardingFlow(try setup.openedHome())
            let bundle = try setup.bundle()
            let setup = setup
            let grantCode = grantCode
            let signingIn = Task {
                try await flow.signIn(
                    server: URL(string: setup.server)!, trustBundle: bundle, name: setup.name,
                    phoneNumber: setup.phone, code: setup.codeSource(), grantCode: grantCode, family: setup.family,
                    configuration: configuration,
                    events: { Self.show($0, json: json) })
            }
            // Ctrl-C cancels the sign-in: the siblings are told to dismiss its prompt before pixie exits.
            let interrupt = onInterrupt { signingIn.cancel() }
            defer { interrupt.cancel() }
            let state = try await signingIn.value
            let membership = state.membership!
            if json {
                try printJSON(["event": "joined", "account_id": membership.accountID, "device_id": membership.deviceID])
            } else {
                streams.out("Approved: this device, \(setup.name), is in the account.")
            }
            if noSync {
                if !json {
                    streams.out(
                        "Its store is empty: run `pixie sync --home \(setup.home)` while a sibling listens to absorb it."
                    )
                }
                return
            }
            // The second half of the seed's one spinner: the store.
            try await absorbStore(
                home: try openHome(setup.home), homePath: setup.home, json: json, options: absorb, joined: true)
        }
    }

    static func show(_ event: SignInApprovalRequester.Event, json: Bool) {
        switch event {
        case .waiting(let code):
            if json {
                try? printJSON(["event": "waiting", "check_code": code])
            } else {
                streams.out("Check code: \(code.prefix(4)) \(code.dropFirst(4))")
                streams.out("Type it on a device already signed in (`pixie listen` there) to approve.")
            }
        case .acknowledged(let family):
            if json {
                try? printJSON(["event": "acknowledged", "device_family": family])
            } else {
                streams.out("Approve on your \(family).")
            }
        case .clockOff(let offset):
            let minutes = Int((abs(offset) / 60).rounded())
            let way = offset > 0 ? "ahead of" : "behind"
            let text =
                "This device's clock is about \(minutes) minute\(minutes == 1 ? "" : "s") \(way) the server's. Your "
                + "other devices ignore a sign-in request more than 5 minutes off their own clocks, without a word, so "
                + "set this device's clock right (turn on automatic time) and sign in again if none answers."
            if json {
                try? printJSON(["event": "clock_off", "seconds": Int(offset.rounded()), "detail": text])
            } else {
                streams.err(text)
            }
        }
    }
}

/// Calls `handler` (once per signal) on SIGINT instead of ending the process; cancel the source to restore it.
func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler(handler: handler)
    source.setCancelHandler { signal(SIGINT, SIG_DFL) }
    source.resume()
    return source
}

struct Listen: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen", abstract: "Stay online and answer sign-in requests from new devices.",
        discussion: """
            Sign-in requests wake no one, so a device answers only while it listens. For each request that passes \
            every check, it asks: type the new device's check code to approve, or "no" to reject. For scripts, \
            --approve-code CODE approves the request showing CODE without asking, and --reject rejects every request.
            """)

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @OptionalOption(
        name: .long("family"),
        help: "This device's family, as the new device shows it (default: the one it enrolled with).")
    var family: String?
    @OptionalOption(name: .long("approve-code"), help: "Approve the request showing this check code; ask nothing.")
    var approveCode: String?
    @Flag(name: .long("reject"), help: "Reject every request; ask nothing.") var reject: Bool
    @Flag(name: .long("once"), help: "Stop after the first request is answered.") var once: Bool
    @Flag(
        name: .long("grant-code"),
        help: "Show a six-digit code a new device can join with (`pixie signin --grant-code`), valid 3 minutes.")
    var grantCode: Bool
    @OptionalOption(
        name: .long("trust-bundle"),
        help: "The app's trust bundle, if newer than the one this device enrolled with: its phone-verify keys (a "
            + "rotation) and sender-cert key are taken first.")
    var trustBundle: String?
    @OptionalOption(
        name: .long("push-token"),
        help: "The app's push token (APNs or FCM, as text): a sign-in or a new device's request wakes this device "
            + "through it while it is not listening.")
    var pushToken: String?
    @Flag(name: .long("json"), help: "Print events as JSON lines.") var json: Bool

    func validate() throws {
        if approveCode != nil && reject { throw ValidationError("--approve-code and --reject exclude each other") }
        if let pushToken, pushToken.isEmpty || pushToken.utf8.count > 512 {
            throw ValidationError("--push-token must be 1 to 512 bytes")
        }
    }

    func run() async throws {
        let json = json
        let approveCode = approveCode
        let reject = reject
        let once = once
        let offer: (@Sendable (GrantCode) -> Void)? = grantCode ? { @Sendable in Self.show($0, json: json) } : nil
        // With --once, the first answer ends the command: `run` returns through here, so the process exits the
        // usual way, from its main task, and not from a report callback on another thread while the rest run.
        let (answered, answer) = AsyncStream.makeStream(of: Void.self)
        try await reporting {
            let opened = try openHome(home)
            if let trustBundle {
                guard let data = FileManager.default.contents(atPath: trustBundle),
                    let bundle = try? JSONDecoder().decode(TrustBundle.self, from: data)
                else {
                    throw failure("\(trustBundle) is not a trust bundle; `pixie-server trust-bundle > FILE` makes one")
                }
                if try OnboardingFlow(home: opened, environment: deviceEnvironment(opened)).adoptTrustBundle(bundle),
                    !json
                {
                    streams.out("Took the keys of \(trustBundle) (phone-verify and sender-cert).")
                }
            }
            var listener = InboxListener(
                context: try await DeviceContext.current(home: opened, environment: deviceEnvironment(opened)),
                deviceFamily: try family ?? opened.load()?.family ?? "Linux")
            listener.pushToken = pushToken.map { Data($0.utf8) }
            let task = Task {
                try await listener.run(
                    ready: {
                        if json {
                            try? printJSON(["event": "listening"])
                        } else {
                            streams.out("Listening for sign-in requests. Ctrl-C stops.")
                        }
                    },
                    offerCode: offer,
                    decide: { prompt in
                        if reject { return .reject }
                        if let approveCode {
                            return prompt.matches(checkCode: approveCode) ? .approve(checkCode: approveCode) : .ignore
                        }
                        Lines.standardInput.discardTyped()
                        if json {
                            try? printJSON(["event": "prompt", "device_model": prompt.request.deviceModel])
                        } else {
                            streams.out(
                                "A new device, \"\(prompt.request.deviceModel)\", asks to join this account. To approve, type "
                                    + "the check code shown on that device's own screen (nowhere else); no to reject:")
                        }
                        for _ in 0..<3 {
                            guard let line = await readLineAsync()?.trimmingCharacters(in: .whitespaces) else {
                                return .ignore
                            }
                            if ["no", "n", "reject"].contains(line.lowercased()) { return .reject }
                            if prompt.matches(checkCode: line) { return .approve(checkCode: line) }
                            if json {
                                try? printJSON(["event": "wrong_check_code"])
                            } else {
                                streams.out("That is not the code the new device shows. Type it again, or no:")
                            }
                        }
                        return .reject
                    },
                    report: { outcome in
                        Self.print(outcome, json: json)
                        if once, outcome.isAnswer { answer.finish() }
                    })
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await task.value }
                group.addTask { for await _ in answered {} }
                defer {
                    group.cancelAll()
                    task.cancel()
                }
                try await group.next()
            }
        }
    }

    static func show(_ grant: GrantCode, json: Bool) {
        if json {
            let expiresAt = Int(grant.expiresAt.timeIntervalSince1970)
            try? printJSON(["event": "grant_code", "code": grant.code, "expires_at": expiresAt])
            return
        }
        let code = grant.code
        let minutes = max(1, Int(grant.expiresAt.timeIntervalSinceNow / 60 + 0.5))
        streams.out(
            "Code for the new device: \(code.prefix(3)) \(code.dropFirst(3)), for \(minutes) minute\(minutes == 1 ? "" : "s"). "
                + "On it, run `pixie signin --grant-code \(code)`, then type the check code it shows here; keep "
                + "this running.")
    }

    static func print(_ outcome: InboxListener.Outcome, json: Bool) {
        let (event, text): (String, String)
        switch outcome {
        case .approved(let model): (event, text) = ("approved", "Approved \(model).")
        case .rejected(let model): (event, text) = ("rejected", "Rejected \(model).")
        case .ignored(let model): (event, text) = ("ignored", "Left \(model)'s request unanswered.")
        case .wrongCheckCode(let model): (event, text) = ("wrong_check_code", "Wrong check code for \(model).")
        case .dropped(let drop): (event, text) = ("dropped", "Dropped a request: \(drop).")
        case .failed(let model, let reason): (event, text) = ("failed", "Could not answer \(model): \(reason)")
        case .approvedByCode(let model):
            (event, text) = (
                "approved_by_code", "Sent the account's seeds to \(model), enrolled with this device's code."
            )
        case .dismissed(let model, let outcome):
            (event, text) = ("dismissed", "The request from \(model) was \(outcome): its prompt is dismissed.")
        case .sync(.sent(let rows, let bytes)):
            (event, text) = (
                "sync_sent", "Sent this device's store (\(rows) rows, \(bytes) bytes sealed) to a new device."
            )
        case .sync(.acknowledged(let ok, let reason)):
            (event, text) =
                ok
                ? ("sync_absorbed", "The new device absorbed the store.")
                : ("sync_not_absorbed", "The new device could not absorb the store: \(reason)")
        case .sync(.dropped(let reason)):
            (event, text) = ("sync_dropped", "Dropped a frame on this device's inbox: \(reason).")
        case .sync(.failed(let reason)): (event, text) = ("sync_failed", "Could not send the store: \(reason)")
        case .sync(.cancelled):
            (event, text) = ("sync_cancelled", "The new device no longer needs this device's store.")
        case .reconnecting(let reason, let delay):
            let seconds = String(
                format: "%.1f", Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            (event, text) = (
                "reconnecting", "The relay connection ended (\(reason)); connecting again in \(seconds) s."
            )
        case .reconnected:
            (event, text) = ("reconnected", "Connected to the relay again; listening.")
        case .rotated(let epoch):
            (event, text) = (
                "rotated", "The account's keys were rotated (a device was removed; epoch \(epoch)): took the new ones."
            )
        case .rotationRefused(let reason):
            (event, text) = ("rotation_refused", "Could not take the account's new keys: \(reason)")
        case .reconcile(.round(let round)):
            // A round that moved nothing and agreed on everything is said in --json only: it comes every interval.
            if !json, round.rowsSent + round.rowsApplied == 0, round.differed == 0, round.rowsHeld == 0 { return }
            (event, text) = ("sync_round", roundLine(round, names: [:]))
        case .reconcile(.collected(let category, let count)):
            (event, text) = (
                "sync_collected",
                "Collected \(count) tombstone\(count == 1 ? "" : "s") of \(category.rawValue): every device has them."
            )
        case .reconcile(.dropped(let reason)):
            (event, text) = ("sync_round_dropped", "Dropped a reconcile message: \(reason).")
        case .reconcile(.passed(let reason)), .sync(.passed(let reason)):
            // Another process of this home (`pixie sync`) reads these itself: said in --json only.
            guard json else { return }
            (event, text) = ("sync_passed", "Left to another process of this home: \(reason).")
        case .reconcile(.failed(let reason)):
            (event, text) = ("sync_round_failed", "The reconcile loop: \(reason)")
        case .reconcile(.clockCorrected(let offset)):
            (event, text) = ("clock_corrected", clockLine(offset))
        }
        if json { try? printJSON(["event": event, "detail": text]) } else { streams.out(text) }
    }
}

extension InboxListener.Outcome {
    var isAnswer: Bool {
        switch self {
        case .approved, .approvedByCode, .rejected: true
        default: false
        }
    }
}

struct SignOut: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout", abstract: "End this device's session and forget the account here.",
        discussion: "Removes this device's keys and store from --home. The account's only device is not signed out "
            + "unless --last-device says so: its account seed exists nowhere else.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(
        name: .long("last-device"),
        help: "Sign out even the account's only device, losing its account seed and store for good.")
    var lastDevice: Bool

    func run() async throws {
        try await reporting {
            try await onboardingFlow(try openHome(home)).signOut(evenIfLast: lastDevice)
            streams.out("Signed out: this device's session is ended and its keys are removed from \(home).")
        }
    }
}

#if canImport(Glibc)
    // Buffers of 2 MiB and more (a download's ranges) are mapped on their own and go straight back to the system
    // when freed. glibc's default threshold grows with what is freed, after which such buffers come from the heap
    // and fragment it: a 1 GiB absorption then peaked anywhere from 57 to 107 MiB (docs/benchmarks.md). Up to
    // 4 MiB freed at the heap's top is kept, not handed back and faulted in again for the next 1 MiB piece (the
    // default, 128 KiB once the threshold is set, spent a fifth of an absorption in page faults), and two arenas
    // at most keep the threads' freed memory from adding up.
    _ = CMalloc_mapAllocationsFrom(2 << 20)
    _ = CMalloc_limitArenas(2)
    _ = CMalloc_keepFreedUpTo(4 << 20)
#endif
await PixieCommand.main()
