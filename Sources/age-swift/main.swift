import Age
import Foundation

/// `age-swift`: the `Age` module on files, for benchmarking beside the `age` CLI (scripts/bench-age.sh).
/// A benchmark and tool entry point, not a replacement for `age`: X25519 recipients and key files only.
///
///     age-swift -r age1... [-o OUTPUT] [INPUT]      encrypt (binary) to the recipient
///     age-swift -d -i KEYFILE [-o OUTPUT] [INPUT]   decrypt with the identities in KEYFILE
///
/// INPUT and OUTPUT default to standard input and output. Exit status: 0 success, 1 failure (the
/// message on standard error; a partly written OUTPUT file is removed), 64 usage error.

let usage = """
    usage: age-swift -r RECIPIENT [-o OUTPUT] [INPUT]
           age-swift -d -i IDENTITY_FILE [-o OUTPUT] [INPUT]
    """

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("age-swift: \(message)\n".utf8))
    if status == 64 { FileHandle.standardError.write(Data("\(usage)\n".utf8)) }
    exit(status)
}

struct Options {
    var decrypt = false
    var recipients: [String] = []
    var identityFiles: [String] = []
    var output: String?
    var input: String?

    init(_ arguments: ArraySlice<String>) {
        var iterator = arguments.makeIterator()
        func value(_ flag: String) -> String {
            guard let value = iterator.next() else { fail("\(flag) needs a value", status: 64) }
            return value
        }
        while let argument = iterator.next() {
            switch argument {
            case "-d", "--decrypt": decrypt = true
            case "-r", "--recipient": recipients.append(value(argument))
            case "-i", "--identity": identityFiles.append(value(argument))
            case "-o", "--output": output = value(argument)
            case "-h", "--help":
                print(usage)
                exit(0)
            case _ where argument.hasPrefix("-") && argument != "-":
                fail("unknown option '\(argument)'", status: 64)
            default:
                guard input == nil else { fail("more than one input file", status: 64) }
                input = argument
            }
        }
        if decrypt {
            guard !identityFiles.isEmpty, recipients.isEmpty else {
                fail("decrypting needs -i IDENTITY_FILE and takes no -r", status: 64)
            }
        } else {
            guard !recipients.isEmpty, identityFiles.isEmpty else {
                fail("encrypting needs -r RECIPIENT and takes no -i (use -d to decrypt)", status: 64)
            }
        }
    }
}

let options = Options(CommandLine.arguments.dropFirst())

let input: FileHandle
if let path = options.input, path != "-" {
    guard let handle = FileHandle(forReadingAtPath: path) else { fail("cannot open the input '\(path)'") }
    input = handle
} else {
    input = .standardInput
}

var createdOutput: String?
let output: FileHandle
if let path = options.output, path != "-" {
    let existed = FileManager.default.fileExists(atPath: path)
    guard existed || FileManager.default.createFile(atPath: path, contents: nil),
        let handle = FileHandle(forWritingAtPath: path)
    else { fail("cannot open the output '\(path)' for writing") }
    var isRegular = false
    if let type = try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType {
        isRegular = type == .typeRegular
    }
    if isRegular { try? handle.truncate(atOffset: 0) }
    if !existed || isRegular { createdOutput = path }
    output = handle
} else {
    output = .standardOutput
}

do {
    if options.decrypt {
        var identities: [any AgeIdentity] = []
        for path in options.identityFiles {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                fail("cannot read the identity file '\(path)'")
            }
            identities += try AgeKeyFile.identities(from: text)
        }
        try Age.decrypt(from: input, to: output, identities: identities)
    } else {
        let recipients = try AgeKeyFile.recipients(from: options.recipients.joined(separator: "\n"))
        try Age.encrypt(from: input, to: output, recipients: recipients)
    }
} catch {
    if let createdOutput { try? FileManager.default.removeItem(atPath: createdOutput) }
    fail("\(error)")
}
