// version.ts: the SDK's name and version, sent with worker/register
// (a test checks them against package.json).
export const SDK_NAME = '@berth/sdk';
export const SDK_VERSION = '0.1.0';
