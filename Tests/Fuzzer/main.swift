import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `Fuzzer`: every fuzz target of the project in one binary, a target chosen by name (scripts/fuzz.sh,
/// docs/fuzzing.md).
///
///     Fuzzer --list                      the targets: name, longest input, what it fuzzes (tab-separated)
///     Fuzzer --seeds TARGET DIR          writes TARGET's seeds (valid inputs from the modules' encoders) to DIR
///     Fuzzer TARGET [libFuzzer flags and corpus folders]
///
/// Built with `-sanitize=fuzzer,address -D FUZZING`, libFuzzer drives the target (coverage-guided); built plainly
/// (as `swift build` does), the same command replays the files and folders it is given, so a finding can be
/// debugged without libFuzzer. libFuzzer runs its workers (`-jobs`) with its own flags only, so the target's
/// name is passed to them in `SIBLINGS_FUZZ_TARGET`.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Fuzzer: \(message)\n".utf8))
    exit(64)
}

var arguments = CommandLine.arguments
switch arguments.dropFirst().first {
case "--list":
    for target in targets { print("\(target.name)\t\(target.maximumLength)\t\(target.summary)") }
    exit(0)
case "--seeds":
    guard arguments.count == 4, let target = targets.first(where: { $0.name == arguments[2] }) else {
        fail("usage: Fuzzer --seeds TARGET DIR (targets: \(targets.map(\.name).joined(separator: ", ")))")
    }
    let folder = URL(fileURLWithPath: arguments[3], isDirectory: true)
    do {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (index, seed) in try target.seeds().enumerated() {
            try seed.write(to: folder.appendingPathComponent("seed-\(index)"))
        }
    } catch {
        fail("writing \(target.name)'s seeds to \(folder.path) failed: \(error)")
    }
    exit(0)
default:
    break
}

let chosen: FuzzTarget
if arguments.count > 1, let named = targets.first(where: { $0.name == arguments[1] }) {
    chosen = named
    arguments.remove(at: 1)
    setenv("SIBLINGS_FUZZ_TARGET", named.name, 1)
} else if let name = ProcessInfo.processInfo.environment["SIBLINGS_FUZZ_TARGET"],
    let named = targets.first(where: { $0.name == name })
{
    chosen = named
} else {
    fail("name a target first: \(targets.map(\.name).joined(separator: ", ")) (or --list, --seeds)")
}

#if FUZZING
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// The chosen target, for the C callback (which captures nothing).
    nonisolated(unsafe) var current = chosen
    var argc = Int32(arguments.count)
    var cArguments: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    let status = cArguments.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var argv = buffer.baseAddress!
        return LLVMFuzzerRunDriver(&argc, &argv) { bytes, count in
            current.run(bytes.map { Data(bytes: $0, count: count) } ?? Data())
            return 0
        }
    }
    exit(status)
#else
    var replayed = 0
    for path in arguments.dropFirst() where !path.hasPrefix("-") {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            fail("no such file or folder: \(path)")
        }
        let files =
            isDirectory.boolValue
            ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
            : [path]
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            chosen.run(data)
            replayed += 1
        }
    }
    print("Fuzzer \(chosen.name): replayed \(replayed) inputs without a finding")
#endif
