import Foundation
import Processes
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("ChildProcess: a child that inherits its three streams, no other descriptor, and no blocked signal")
struct ChildProcessTests {
    /// Runs `/usr/bin/env python3 -c script` to its end from the calling thread; its status and output.
    static func python(_ script: String, input: Pipe? = nil) throws -> (ChildProcess, String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process, printed)
    }

    /// A child that arms SIGALRM for 1 s and sleeps 3 s: with the signal deliverable it dies of it; with the
    /// signal blocked (the mask of the Swift async thread that spawned it) it sleeps on and prints "blocked".
    @Test("a child started from async code receives its own SIGALRM")
    func alarmArrives() async throws {
        let (process, printed) = try Self.python(
            "import signal, time; signal.alarm(1); time.sleep(3); print('blocked')")
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGALRM, "\(printed)")
        #expect(printed.isEmpty)
    }

    /// Without an empty mask SIGTERM would be blocked in a child started from async code, and terminate() would
    /// do nothing to it; without the default actions a signal ignored here (SIGPIPE) would stay ignored in it.
    @Test("terminate() ends a child started from async code, which has no signal blocked or ignored")
    func terminateArrives() async throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["20"]
        try process.run()
        #expect(process.isRunning)
        #expect(!process.waitUntilExit(timeout: .milliseconds(50)))
        process.terminate()
        #expect(process.waitUntilExit(timeout: .seconds(10)), "SIGTERM did not reach the child")
        #expect(!process.isRunning)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGTERM)

        // cat(1) changes no disposition of its own: its blocked and ignored sets are what it was given.
        let status = ChildProcess()
        status.executableURL = URL(fileURLWithPath: "/bin/cat")
        status.arguments = ["/proc/self/status"]
        let output = Pipe()
        status.standardOutput = output
        try status.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        status.waitUntilExit()
        // Bit n - 1 is signal n. Signals 32 and 33 are glibc's own (thread cancellation, setxid), which no
        // program may change; the 31 standard signals are what matters.
        func standardSignals(_ field: String) -> UInt64? {
            text.split(separator: "\n").first { $0.hasPrefix(field + ":") }
                .flatMap { UInt64($0.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
                .map { $0 & 0x7fff_ffff }
        }
        #expect(standardSignals("SigBlk") == 0, "\(text)")
        #expect(standardSignals("SigIgn") == 0, "\(text)")
    }

    /// The attack: a pipe (not close-on-exec, as Foundation's `Pipe` makes them) is open here while a child
    /// starts. A child that inherited its write end would keep it open, and a reader of the pipe would never
    /// see its end while that child lives.
    @Test("a descriptor open in this process is not inherited: a reader sees its pipe end while the child lives")
    func noDescriptorLeaks() async throws {
        let unrelated = Pipe()
        let (process, listed) = try Self.python(
            "import os; print(' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))")
        #expect(process.terminationStatus == 0)
        // 0, 1, 2 and the directory listdir opened; never either end of `unrelated`.
        let descriptors = Set(listed.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .newlines)) })
        #expect(!descriptors.contains(unrelated.fileHandleForReading.fileDescriptor), "\(listed)")
        #expect(!descriptors.contains(unrelated.fileHandleForWriting.fileDescriptor), "\(listed)")
        #expect(descriptors.count == 4, "\(listed)")

        // A long-lived child started while the pipe is open, then the pipe's writer closes: the reader sees the
        // end at once, though the child still runs.
        let sleeper = ChildProcess()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["20"]
        sleeper.standardOutput = FileHandle.nullDevice
        try sleeper.run()
        defer {
            sleeper.kill()
            sleeper.waitUntilExit()
        }
        try unrelated.fileHandleForWriting.close()
        // Within 10 s (the child sleeps 20): a copy of the writer in the child would hold the end back.
        var reader = pollfd(fd: unrelated.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&reader, 1, 10_000) == 1, "the pipe's end did not come while the child lived")
        #expect(unrelated.fileHandleForReading.availableData.isEmpty)
        #expect(sleeper.isRunning)
    }

    @Test("input, output and error pipes, /dev/null, the environment and the working directory reach the child")
    func streamsEnvironmentDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "read line; echo \"$line $GREETING $(pwd)\"; echo oops >&2; exit 3"]
        process.environment = ["GREETING": "hello"]
        process.currentDirectoryURL = directory
        let input = Pipe()
        let output = Pipe()
        let error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Data("first\n".utf8))
        try input.fileHandleForWriting.close()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(out == "first hello \(directory.resolvingSymlinksInPath().path)\n")
        #expect(err == "oops\n")
        #expect(process.terminationReason == .exit && process.terminationStatus == 3)

        let quiet = ChildProcess()
        quiet.executableURL = URL(fileURLWithPath: "/bin/sh")
        quiet.arguments = ["-c", "cat; echo to-null; echo to-null >&2"]
        quiet.standardInput = FileHandle.nullDevice
        quiet.standardOutput = FileHandle.nullDevice
        quiet.standardError = FileHandle.nullDevice
        try quiet.run()
        quiet.waitUntilExit()
        #expect(quiet.terminationStatus == 0)
    }

    /// Without the reaper a dropped child stays a zombie, which kill(pid, 0) still finds (a test asking whether
    /// its server is alive would be told yes).
    @Test("a child dropped without a wait is reaped once it exits: no zombie stays behind")
    func droppedChildIsReaped() throws {
        var pid: Int32 = 0
        do {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/true")
            try process.run()
            pid = process.processIdentifier
        }
        var gone = false
        for _ in 0..<1000 {
            if kill(pid, 0) != 0 && errno == ESRCH {
                gone = true
                break
            }
            usleep(10_000)
        }
        #expect(gone, "process \(pid) stayed behind for 10 s")
    }

    @Test("what cannot start is refused with the reason: no program, a missing one, a stream of another type, twice")
    func refusals() throws {
        #expect(throws: ChildProcessError.self) { try ChildProcess().run() }
        let missing = ChildProcess()
        missing.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        let error = #expect(throws: ChildProcessError.self) { try missing.run() }
        #expect(error?.description == "could not start /nonexistent/program: No such file or directory")
        #expect(!missing.isRunning)

        let wrongStream = ChildProcess()
        wrongStream.executableURL = URL(fileURLWithPath: "/bin/true")
        wrongStream.standardOutput = "a string"
        let streamError = #expect(throws: ChildProcessError.self) { try wrongStream.run() }
        #expect(streamError?.description.contains("give a Pipe or a FileHandle") == true)

        let twice = ChildProcess()
        twice.executableURL = URL(fileURLWithPath: "/bin/true")
        try twice.run()
        #expect(throws: ChildProcessError.self) { try twice.run() }
        twice.waitUntilExit()
        #expect(twice.terminationStatus == 0)
    }
}
