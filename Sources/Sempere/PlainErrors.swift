import Age
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What went wrong, in words a person reads: Foundation's file errors by what they mean (`a file is in
/// the way`, not `NSCocoaErrorDomain Code=516`), JSON decoding errors by where the bad value is, and the
/// library's own errors by their reason. Every message of the Sempere module that wraps a foreign error
/// goes through here.
func plainDescription(of error: any Error) -> String {
    if let error = error as? SempereError { return error.reason }
    if let error = error as? AgeError { return error.reason }
    if let error = error as? DecodingError { return plainDescription(of: error) }
    if let error = error as? CocoaError {
        switch error.code {
        case .fileWriteFileExists: return "something else is already there (a file where a folder should be)"
        case .fileNoSuchFile, .fileReadNoSuchFile: return "no such file or folder"
        case .fileReadNoPermission, .fileWriteNoPermission: return "permission denied"
        case .fileWriteOutOfSpace: return "the disk is full"
        case .fileWriteVolumeReadOnly: return "the disk is read-only"
        case .fileReadCorruptFile: return "the file is damaged or not in the expected format"
        case .fileReadInvalidFileName, .fileWriteInvalidFileName: return "the file name is not valid"
        default: break
        }
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return "the file system refused it (Foundation error \(error.code.rawValue))"
    }
    if let error = error as? POSIXError { return String(cString: strerror(error.code.rawValue)) }
    let error = error as NSError
    if error.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(error.code))) }
    return "\(error.localizedDescription)"
}

/// Where a JSON value is wrong and how: `at "body.devices[0].name": expected a string`.
func plainDescription(of error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
        let components = context.codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }
        let joined = components.joined().drop(while: { $0 == "." })
        return joined.isEmpty ? "the top level" : "\"\(joined)\""
    }
    switch error {
    case .dataCorrupted(let context):
        return context.codingPath.isEmpty ? "it is not valid JSON" : "the value at \(path(context)) is not valid"
    case .keyNotFound(let key, let context):
        return "the field \"\(key.stringValue)\" is missing at \(path(context))"
    case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
        return "the value at \(path(context)) is not a \(type == String.self ? "string" : "\(type)")"
    @unknown default:
        return "it does not decode"
    }
}

/// Why creating the folder `url` failed, in words: most often something on its path is a file, not a
/// folder, which Foundation on Linux reports only as an unknown write error.
func plainCreateFailure(at url: URL, _ error: any Error) -> String {
    var ancestor = url.standardizedFileURL
    var isDirectory: ObjCBool = false
    while ancestor.path != "/" && !FileManager.default.fileExists(atPath: ancestor.path, isDirectory: &isDirectory) {
        ancestor = ancestor.deletingLastPathComponent()
    }
    if ancestor.path != "/" && !isDirectory.boolValue {
        return "\(ancestor.path) is a file, not a folder"
    }
    return plainDescription(of: error)
}
