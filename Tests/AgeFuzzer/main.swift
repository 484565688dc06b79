import Age
import Foundation

/// The age parser fuzz target: header, armor and payload parsing through `Age.decrypt`, and key-file
/// parsing through `AgeKeyFile`, on arbitrary bytes. Any error that is not an `AgeError`, and any crash,
/// is a finding.
///
/// Built two ways (scripts/fuzz-age.sh):
/// - with `-sanitize=fuzzer -D FUZZING`: libFuzzer drives `fuzzOne` (coverage-guided);
/// - without: it replays the files named on the command line through `fuzzOne` (a corpus or a crash).
///
/// The identities are those of the C2SP CCTV age vectors, so seeds from that corpus get past the header
/// into the payload.
let identities: [any AgeIdentity] = {
    do {
        return [
            try X25519Identity(string: "AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0"),
            try HybridIdentity(
                string: "AGE-SECRET-KEY-PQ-1HZLGZUPT4ETPKDEV8HSGFDCYZ4E522W0A7PU2LHT8EH9W6YLNC3SW78XKG"),
            // A low maximum work factor keeps each input fast; the parser is what is fuzzed.
            ScryptIdentity(passphrase: "password", maxWorkFactor: 10),
        ]
    } catch {
        fatalError("the fuzz target's fixed identities do not parse: \(error)")
    }
}()

func fuzzOne(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let input = bytes.map { Data(bytes: $0, count: count) } ?? Data()
    do {
        var released = 0
        try Age.decrypt(input, identities: identities) { released += $0.count }
    } catch is AgeError {
        // A refusal with a reason: what the parser should do with garbage.
    } catch {
        fatalError("Age.decrypt threw something other than an AgeError: \(error)")
    }
    do {
        _ = try AgeKeyFile.identities(from: String(decoding: input, as: UTF8.self))
    } catch is AgeError {
    } catch {
        fatalError("AgeKeyFile threw something other than an AgeError: \(error)")
    }
    return 0
}

#if FUZZING
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv) { bytes, count in fuzzOne(bytes, count) })
#else
    var replayed = 0
    for path in CommandLine.arguments.dropFirst() {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            FileHandle.standardError.write(Data("AgeFuzzer: no such file or folder: \(path)\n".utf8))
            exit(64)
        }
        let files =
            isDirectory.boolValue
            ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).map { "\(path)/\($0)" } : [path]
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            _ = data.withUnsafeBytes { fuzzOne($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
            replayed += 1
        }
    }
    print("AgeFuzzer: replayed \(replayed) inputs without a finding")
#endif
