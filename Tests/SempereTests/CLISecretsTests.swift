import Foundation
import Testing

/// Secrets the terminal way (issue 42): the kit, a passphrase and the six words are asked for on the terminal with
/// echo off; standard input only with `--secret-stdin`; an environment variable only when named with
/// `--secret-env`, and then with a warning.
extension CLITests {
    /// Runs `sempere arguments` as `device` on a new pseudo-terminal (Python's `pty`, Debian's python3): waits for
    /// the prompt, types `typed` and Enter, and returns the exit status and everything the terminal showed.
    static func onTerminal(
        _ scratch: Scratch, _ device: String, _ arguments: [String], typing typed: String, after prompt: String,
        environment extra: [String: String] = [:]
    ) throws -> (status: Int32, screen: String) {
        let driver = """
            import os, pty, sys, json, time
            prompt, typed, argv = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3:]
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(argv[0], argv)
            seen, sent, deadline = b"", False, time.time() + 60
            while time.time() < deadline:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                if not sent and prompt in seen:
                    time.sleep(0.2)
                    os.write(fd, typed + b"\\n")
                    sent = True
            _, status = os.waitpid(pid, 0)
            print(json.dumps({"status": os.waitstatus_to_exitcode(status), "screen": seen.decode("utf-8", "replace")}))
            """
        var environment = ProcessInfo.processInfo.environment
        environment["SEMPERE_CONFIG"] = scratch.config(device)
        environment["HOME"] = scratch.root.path
        environment.merge(extra) { $1 }
        // `run` puts the sempere binary after the wrapper: python3 -c <driver> <prompt> <typed> <sempere> <arguments>.
        let result = try Self.run(
            arguments, environment: environment, directory: scratch.root,
            wrapper: ["/usr/bin/python3", "-c", driver, prompt, typed])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any], "\(result.err)")
        return (Int32(object["status"] as? Int ?? -1), object["screen"] as? String ?? "")
    }

    @Test("the kit is asked on the terminal with echo off; without one, and without a flag, the error names the flags")
    func secretsTheTerminalWay() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let kit = try Self.twoDevicesWithKit(scratch).kit

        // On a terminal: the prompt, the kit typed and not shown, the replacement made.
        let replaced = try Self.onTerminal(
            scratch, "A", ["kit", "replace", "--with-current-kit", "--json"], typing: kit, after: "kit")
        #expect(replaced.status == 0, "\(replaced.screen)")
        #expect(replaced.screen.contains("The current recovery kit"), "\(replaced.screen)")
        #expect(!replaced.screen.contains(kit), "the typed kit was echoed: \(replaced.screen)")
        let newKit = try #require(
            replaced.screen.range(of: "SEMPERE-KIT-1[A-Z0-9]+", options: .regularExpression).map {
                String(replaced.screen[$0])
            })

        // No terminal (a new session has none) and no flag: nothing read from the environment or standard input.
        let refused = try scratch.run(
            "A", ["kit", "replace", "--with-current-kit"], input: newKit + "\n",
            environment: ["SEMPERE_KIT": newKit], wrapper: ["/usr/bin/setsid", "--wait"])
        #expect(refused.status == 1, "\(refused.out)")
        #expect(
            refused.err.contains("read from the terminal") && refused.err.contains("--secret-stdin")
                && refused.err.contains("--secret-env"), "\(refused.err)")
        // Named in a flag, the environment is read, with a warning.
        let fromEnvironment = try scratch.run(
            "A", ["kit", "replace", "--with-current-kit", "--secret-env", "SEMPERE_KIT", "--json"],
            environment: ["SEMPERE_KIT": newKit], wrapper: ["/usr/bin/setsid", "--wait"])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.err)")
        #expect(
            fromEnvironment.err.contains("warning: reading the current recovery kit")
                && fromEnvironment.err.contains("from $SEMPERE_KIT"))
        let unset = try scratch.run("A", ["kit", "replace", "--with-current-kit", "--secret-env", "NOT_SET_ANYWHERE"])
        #expect(unset.status == 1 && unset.err.contains("$NOT_SET_ANYWHERE is not set"), "\(unset.err)")
    }
}
